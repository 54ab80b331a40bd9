"""``python -m scalegrade.cli``: the ``scalegrade`` command (the benchmarks start it so)."""

from scalegrade.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
