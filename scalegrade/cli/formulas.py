"""The cost model's commands: `verify` its derivations, `calc` a formula."""

from __future__ import annotations

import sys
import time
from typing import Any

import click
from rich.table import Table

from scalegrade.cli.common import console, fail


@click.command()
@click.option("--points", default=12, show_default=True, help="Random points per derivation.")
def verify(points: int) -> None:
    """Check every sympy derivation of the cost model against its numeric function."""
    from costmodel.verify import verify_all

    start = time.perf_counter()
    checks = verify_all(points=points)
    elapsed = time.perf_counter() - start
    table = Table(title="Derivations of the cost model", show_lines=False)
    for col in ("formula", "derivation", "symbolic", "numeric", "ms"):
        table.add_column(col, justify="right" if col == "ms" else "left")
    for c in checks:
        mark = {True: "[green]ok[/]", False: "[red]FAIL[/]"}
        table.add_row(
            c.formula,
            c.title,
            mark[c.symbolic_ok],
            f"{mark[c.numeric_ok]} ({c.points} pts)",
            f"{1000 * c.seconds:.0f}",
        )
    console.print(table)
    failed = [c for c in checks if not c.ok]
    for c in failed:
        console.print(f"[red]FAIL[/] {c.formula}: {c.title}: {c.detail}")
    formulas = len({c.formula for c in checks})
    console.print(
        f"{len(checks) - len(failed)}/{len(checks)} derivations verified "
        f"({formulas} formulas) in {elapsed:.1f} s"
    )
    sys.exit(1 if failed else 0)


def _parse_value(name: str, formula: Any, raw: str) -> Any:
    from costmodel.units import UnitError, to_si

    dom = formula.domains[name]
    text = raw.strip()
    try:
        if dom.kind == "bool":
            lowered = text.lower()
            if lowered not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError("expected true or false")
            return lowered in ("true", "yes", "1")
        if dom.kind in ("distribution", "reals"):
            return [float(x) for x in text.strip("[]()").split(",") if x.strip()]
        if dom.kind == "choice":
            return next(c for c in dom.choices if str(c) == text)
        value = to_si(text, dom.unit)
        return int(value) if dom.kind == "int" and float(value).is_integer() else value
    except StopIteration:
        fail(f"{formula.name}: {name} = {raw!r}: must be one of {dom.choices}")
    except (ValueError, UnitError) as err:
        unit = f" in {dom.unit}" if dom.unit else ""
        fail(f"{formula.name}: {name} = {raw!r}: {err} ({dom.meaning}{unit})")


def _gpu_defaults(gpu_name: str, precision: str) -> dict[str, float]:
    from costmodel.hardware import gpu

    try:
        g = gpu(gpu_name)
        peak = g.peak(precision)
    except KeyError as err:
        fail(str(err.args[0]))
    return {"peak_flops": peak, "bandwidth": g.memory_bandwidth, "watts": g.tdp_watts}


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("name", required=False)
@click.argument("assignments", nargs=-1)
@click.option("--list", "list_", is_flag=True, help="List every formula.")
@click.option("--gpu", "gpu_name", help="Fill peak_flops, bandwidth, watts from the catalog.")
@click.option("--precision", default="bf16", show_default=True, help="Precision for --gpu.")
def calc(
    name: str | None,
    assignments: tuple[str, ...],
    list_: bool,
    gpu_name: str | None,
    precision: str,
) -> None:
    """Evaluate a formula: scalegrade calc memory.model_state_bytes n_params=7e9

    Values may carry units (bandwidth=25GB/s, n_bytes=1GB); a bare number is in the
    formula's SI unit.
    """
    import costmodel
    from costmodel.units import human

    if list_ or not name:
        for f in costmodel.formulas().values():
            args = ", ".join(
                p.name if p.default is p.empty else f"{p.name}={p.default!r}"
                for p in f.signature.parameters.values()
            )
            derived = " [derived]" if f.has_derivation else ""
            click.echo(f"{f.name}({args}) -> {f.unit or 'number'}{derived}")
            click.echo(f"    {f.summary}  ({f.cite})")
        return
    try:
        formula = costmodel.formula(name)
    except costmodel.UnknownFormula as err:
        fail(str(err))
    kwargs: dict[str, Any] = {}
    if gpu_name:
        params = formula.signature.parameters
        defaults = _gpu_defaults(gpu_name, precision)
        kwargs.update({k: v for k, v in defaults.items() if k in params})
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep:
            fail(f"{name}: expected key=value, got {item!r}")
        if key not in formula.signature.parameters:
            allowed = ", ".join(formula.signature.parameters)
            fail(f"{name}: unknown argument {key!r} (arguments: {allowed})")
        kwargs[key] = _parse_value(key, formula, raw)
    try:
        result = formula.func(**kwargs)
    except costmodel.ArgumentError as err:
        fail(str(err))
    shown = ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in kwargs.items()
    )
    console.print(f"[bold]{name}[/]({shown})", highlight=False)
    console.print(f"  = {human(result, formula.unit)}", highlight=False)
    console.print(f"  [dim]{formula.summary} — {formula.cite}[/]", highlight=False)


# Registered on `scalegrade` by scalegrade/cli/__init__.py.
COMMANDS = (verify, calc)
