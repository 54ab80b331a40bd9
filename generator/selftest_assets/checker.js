/* ScaleGrade self-test checker: the rules of autograder/compare.py and contract/answers.py,
 * in the browser.
 *
 * Pure functions, no DOM: window.ScaleGradeChecker.gradeQuestion(question, texts, policy,
 * units) grades one question's typed answers exactly as the Python grader grades the same
 * strings (tests/generator/test_selftest.py runs both on the same answer sets):
 *   - reading: the page's input syntax (normalize), then a bare number is in the unit
 *     the question asks, a number with a unit is converted with the factors of the course's
 *     pint registry (costmodel/units.py), embedded at build time;
 *   - tolerance (rel, abs, significant figures), misconceptions with their feedback and
 *     credit, error carried forward (the answer's formula over the student's own earlier
 *     answers, compiled to JavaScript at build time; plausibility: same sign, within the
 *     policy's plausible_factor, contract.PLAUSIBLE_FACTOR).
 */
(function (root) {
  "use strict";

  // --- Python's arithmetic, for carried answers (generator/selftest_ecf.py emits calls) ---

  class Unknown extends Error {}
  class Raises extends Error {}

  function raise(what) {
    throw new Raises(what);
  }

  function pyRound(x) {
    if (!isFinite(x)) raise("round of a non-finite number");
    const f = Math.floor(x);
    const d = x - f;
    if (d > 0.5) return f + 1;
    if (d < 0.5) return f;
    return f % 2 === 0 ? f : f + 1; // half to even
  }

  function pyDivmod(a, b) {
    if (b === 0) raise("division by zero");
    let mod = a % b;
    let div = (a - mod) / b;
    if (mod) {
      if (b < 0 !== mod < 0) {
        mod += b;
        div -= 1.0;
      }
    } else {
      mod = b < 0 ? -0.0 : 0.0;
    }
    let floordiv;
    if (div) {
      floordiv = Math.floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = a / b < 0 || Object.is(a / b, -0) ? -0.0 : 0.0;
    }
    return [floordiv, mod];
  }

  const py = {
    div(a, b) {
      if (b === 0) raise("division by zero");
      return a / b;
    },
    floordiv: (a, b) => pyDivmod(a, b)[0],
    mod: (a, b) => pyDivmod(a, b)[1],
    pow(a, b) {
      if (a === 1 || b === 0) return 1;
      if (a === 0 && b < 0) raise("zero to a negative power");
      if (a < 0 && isFinite(b) && !Number.isInteger(b)) raise("complex power");
      const r = Math.pow(a, b);
      if (!isFinite(r) && isFinite(a) && isFinite(b)) raise("overflow");
      return r;
    },
    floor(x) {
      if (!isFinite(x)) raise("floor of a non-finite number");
      return Math.floor(x);
    },
    ceil(x) {
      if (!isFinite(x)) raise("ceil of a non-finite number");
      return Math.ceil(x);
    },
    round: pyRound,
    trunc(x) {
      if (!isFinite(x)) raise("int of a non-finite number");
      return Math.trunc(x);
    },
    snap(x) {
      // costmodel/_numeric.py: within a relative 1e-12 of a whole number, that number
      const nearest = pyRound(x);
      return Math.abs(x - nearest) <= 1e-12 * Math.max(1.0, Math.abs(x)) ? nearest : x;
    },
    exp(x) {
      const r = Math.exp(x);
      if (!isFinite(r) && isFinite(x)) raise("overflow");
      return r;
    },
    log(x) {
      if (x <= 0) raise("math domain error");
      return Math.log(x);
    },
    log2(x) {
      if (x <= 0) raise("math domain error");
      return Math.log2(x);
    },
    log10(x) {
      if (x <= 0) raise("math domain error");
      return Math.log10(x);
    },
    log1p(x) {
      if (x <= -1) raise("math domain error");
      return Math.log1p(x);
    },
    sqrt(x) {
      if (x < 0) raise("math domain error");
      return Math.sqrt(x);
    },
    sin(x) {
      if (x === Infinity || x === -Infinity) raise("math domain error");
      return Math.sin(x);
    },
    cos(x) {
      if (x === Infinity || x === -Infinity) raise("math domain error");
      return Math.cos(x);
    },
    tan(x) {
      if (x === Infinity || x === -Infinity) raise("math domain error");
      return Math.tan(x);
    },
    atan: Math.atan,
    // costmodel/arguments.py Domain.problem for a number: true when the value is valid
    domain(x, isInt, low, high, lowOpen, highOpen) {
      if (isInt && !Number.isInteger(x)) return false;
      if (Number.isNaN(x)) return false;
      const tooLow = low !== null && (x < low || (lowOpen && x === low));
      const tooHigh = high !== null && (x > high || (highOpen && x === high));
      if (tooLow || tooHigh) return false;
      if (!isFinite(x) && high === null) return false;
      return true;
    },
    unknown() {
      throw new Unknown("a path of the formula the page has not seen");
    },
    fail() {
      raise("the formula raises here");
    },
  };

  // --- numbers as the notes print them (costmodel/units.py sig and sci) ---

  function pyG(x) {
    if (Number.isNaN(x)) return "nan";
    if (x === Infinity) return "inf";
    if (x === -Infinity) return "-inf";
    if (x === 0) return Object.is(x, -0) ? "-0" : "0";
    return String(x);
  }

  function commas(digits) {
    return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  function fixed(x, decimals) {
    // f"{round(x, decimals):,.{max(decimals, 0)}f}"
    let text;
    if (decimals >= 0) {
      text = x.toFixed(decimals);
    } else {
      const scale = Math.pow(10, -decimals);
      text = (Math.round(x / scale) * scale).toFixed(0);
    }
    const negative = text.startsWith("-");
    const body = negative ? text.slice(1) : text;
    const [whole, frac] = body.split(".");
    return (negative ? "-" : "") + commas(whole) + (frac !== undefined ? "." + frac : "");
  }

  function expo(x, decimals) {
    // f"{x:.{decimals}e}": 1.23e+20
    const [m, e] = x.toExponential(decimals).split("e");
    const n = parseInt(e, 10);
    return `${m}e${n < 0 ? "-" : "+"}${String(Math.abs(n)).padStart(2, "0")}`;
  }

  function sig(x, digits = 3) {
    if (x === 0 || !isFinite(x)) return pyG(x);
    const a = Math.abs(x);
    if (a >= 1e-3 && a < 1e6) return fixed(x, digits - 1 - Math.floor(Math.log10(a)));
    return expo(x, digits - 1);
  }

  const SUPERSCRIPT = { "-": "⁻", 0: "⁰", 1: "¹", 2: "²", 3: "³", 4: "⁴", 5: "⁵", 6: "⁶", 7: "⁷", 8: "⁸", 9: "⁹" };

  function sci(x, digits = 3) {
    if (Number.isInteger(x) && Math.abs(x) < 1e6) return commas(String(x));
    const a = Math.abs(x);
    if (x === 0 || !isFinite(x) || (a >= 1e-3 && a < 1e6)) return sig(x, digits);
    const [m, e] = x.toExponential(digits - 1).split("e");
    const sup = String(parseInt(e, 10)).replace(/[-0-9]/g, (c) => SUPERSCRIPT[c]);
    return `${m} × 10${sup}`;
  }

  function pyRepr(text) {
    const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
    const escaped = text.replace(/\\/g, "\\\\").replace(new RegExp(quote, "g"), "\\" + quote);
    return quote + escaped + quote;
  }

  // --- reading what the student typed ---

  class InputError extends Error {}

  // generator/selftest.py normalize(): the same steps, in the same order.
  function normalize(text, syntax) {
    let s = "";
    for (const ch of String(text)) s += syntax.charmap[ch] !== undefined ? syntax.charmap[ch] : ch;
    s = s.replace(new RegExp(syntax.superscript, "g"), (run) => {
      let out = "^";
      for (const ch of run) out += syntax.supermap[ch];
      return out;
    });
    s = s.replace(/ +/g, " ").trim();
    s = s.replace(new RegExp(syntax.power_of_ten), (m, mantissa, exponent) => `${mantissa}e${exponent}`);
    s = s.replace(new RegExp(syntax.bare_power_of_ten), (m, sign, exponent) => `${sign}1e${exponent}`);
    s = s.replace(new RegExp(syntax.per, "g"), "/");
    s = s.replace(/ +/g, " ").trim();
    s = s.replace(new RegExp(syntax.unit_space), (m, number) => `${number} `);
    if (!new RegExp(syntax.full).test(s)) {
      throw new InputError(`cannot read ${pyRepr(s)} as a number with a unit`);
    }
    return s;
  }

  function dimsKey(dims) {
    return Object.keys(dims)
      .filter((k) => dims[k] !== 0)
      .sort()
      .map((k) => `${k}:${dims[k]}`)
      .join(",");
  }

  // A number with a unit, in the answer's SI unit (pint's conversion of costmodel.units.to_si).
  function toSI(text, siUnit, units) {
    const m = new RegExp(units.syntax.full).exec(text);
    const number = Number(m[1]);
    const target = units.si[siUnit];
    const expected = `expected ${target.words}, e.g. '${target.example}'`;
    if (m[2] === undefined) return number;
    const term = new RegExp(units.syntax.term, "y");
    const rest = m[2];
    let factor = 1;
    const dims = {};
    let i = 0;
    let first = true;
    while (i < rest.length) {
      term.lastIndex = i;
      const t = term.exec(rest);
      const op = t[1] ? t[1].trim() : first ? "" : "*";
      const name = t[2];
      const power = t[3] === undefined ? 1 : parseInt(t[3], 10);
      const entry = units.table[name];
      if (entry === undefined) {
        throw new InputError(`unknown unit ${pyRepr(name)} in ${pyRepr(text)} (${expected})`);
      }
      const [f, dimIndex] = entry;
      const sign = op === "/" ? -1 : 1;
      const scaled = Math.pow(f, power);
      factor = sign < 0 ? factor / scaled : factor * scaled;
      const d = units.dims[dimIndex];
      for (const k of Object.keys(d)) dims[k] = (dims[k] || 0) + sign * power * d[k];
      i = term.lastIndex;
      first = false;
    }
    if (dimsKey(dims) !== dimsKey(units.dims[target.dims])) {
      throw new InputError(`${pyRepr(text)} is not ${target.words} (${expected})`);
    }
    return (number * factor) / target.factor;
  }

  // compare.read_value for a typed string: [SI value or null, problem]
  // contract.readings: the commas of the leading number read as thousands or as a
  // decimal comma; two readings for the ambiguous 1,234; none for a form that is neither
  function readings(s, syntax) {
    const m = new RegExp(syntax.leading_number).exec(s);
    if (!m || !m[2].includes(",")) return [s];
    const sign = m[1];
    const number = m[2];
    const rest = s.slice(m[0].length);
    if (new RegExp(syntax.comma_thousands).test(number)) {
      const plain = sign + number.replace(/,/g, "") + rest;
      const single = number.split(",").length === 2 && !number.includes(".");
      return single ? [plain, sign + number.replace(",", ".") + rest] : [plain];
    }
    if (new RegExp(syntax.comma_decimal).test(number)) return [sign + number.replace(",", ".") + rest];
    return [];
  }

  // compare.read_value; factor: the plausibility bound that picks a reading of 1,234
  function readValue(a, text, units, factor) {
    let blank = "";
    for (const ch of String(text)) blank += units.syntax.charmap[ch] !== undefined ? units.syntax.charmap[ch] : ch;
    if (blank.trim() === "") return [null, "missing"];
    let s;
    try {
      s = normalize(text, units.syntax);
    } catch (err) {
      if (err instanceof InputError) return [null, `wrong_unit:${err.message}`];
      throw err;
    }
    const texts = readings(s, units.syntax);
    if (!texts.length) {
      return [
        null,
        `unreadable:cannot read ${pyRepr(s)}: write decimals with a point (or one decimal comma), and commas only between groups of three digits`,
      ];
    }
    let values = [];
    for (const t of texts) {
      const bare = new RegExp(units.syntax.number).test(t);
      try {
        values.push(a.unit && bare ? Number(t) * a.factor : toSI(t, a.si_unit, units));
      } catch (err) {
        if (err instanceof InputError) return [null, `wrong_unit:${err.message}`];
        throw err;
      }
    }
    if (values.length > 1) {
      const fitting = values.filter((v) => plausible(v, a, factor));
      if (fitting.length !== 1) {
        const [plain, decimal] = texts.map((t) => new RegExp(units.syntax.leading_number).exec(t)[0]);
        return [
          null,
          `unreadable:${pyRepr(s)} can be read as ${plain} or as ${decimal}: write ${plain} without the comma, or ${decimal} with a decimal point`,
        ];
      }
      values = fitting;
    }
    const value = values[0];
    if (!isFinite(value)) return [null, "unreadable:not a finite number"];
    return [value, ""];
  }

  // --- compare.py and contract/answers.py (within, plausible) ---

  function within(value, target, a) {
    const tol = a.tolerance;
    if ("rel" in tol) return Math.abs(value - target) <= tol.rel * Math.abs(target) + 1e-300;
    const f = a.factor;
    if ("abs" in tol) return Math.abs(value - target) / f <= tol.abs + 1e-12;
    const digits = Math.trunc(tol.sig);
    const shownValue = target / f;
    if (shownValue === 0) return value === 0;
    const half = 0.5 * Math.pow(10, Math.floor(Math.log10(Math.abs(shownValue))) - digits + 1);
    return Math.abs(value / f - shownValue) <= half * (1 + 1e-9);
  }

  function shown(value, a) {
    const x = value / a.factor;
    return a.unit ? `${sci(x)} ${a.unit}` : sci(x);
  }

  // contract.plausible: a declared misconception, or within the factor of the key (the
  // factor comes with the page's policy: contract.PLAUSIBLE_FACTOR)
  function plausible(value, a, factor) {
    if ((a.misconceptions || []).some((m) => within(value, m.value, a))) return true;
    const key = a.value;
    if (value === 0 || key === 0 || value > 0 !== key > 0) return false;
    return 1 / factor <= value / key && value / key <= factor;
  }

  // compare.shows_work: half the asked parts answered, and not all with one number
  function showsWork(values) {
    const answered = values.filter((v) => v !== null);
    if (2 * answered.length < values.length) return false;
    return answered.length < 2 || new Set(answered).size > 1;
  }

  function magnitudeHint(value, key) {
    if (key === 0 || value === 0 || value > 0 !== key > 0) return "";
    const ratio = value / key;
    if (ratio > 10 || ratio < 0.1) {
      const off = sci(Math.max(ratio, 1 / ratio), 2);
      return ` Your value is off by a factor of about ${off}: check units and powers of ten.`;
    }
    return "";
  }

  const compiled = new WeakMap();

  function carriedFunction(a) {
    if (!compiled.has(a)) compiled.set(a, new Function("v", "$", `"use strict"; return ${a.ecf.js};`));
    return compiled.get(a);
  }

  // The carried value: {value}, or {raises} (no carried credit), or {unknown}.
  function carriedValue(a, earlier) {
    const v = a.ecf.inputs.map((d) => earlier[d][0]);
    try {
      return { value: Number(carriedFunction(a)(v, py)) };
    } catch (err) {
      if (err instanceof Unknown) return { unknown: true };
      if (err instanceof Raises || err instanceof RangeError) return { raises: true };
      throw err;
    }
  }

  function carried(a, value, earlier, keysById, factor, trace) {
    if (!a.depends_on.length || !a.ecf) return null;
    const wrong = a.depends_on.filter((d) => d in earlier && !earlier[d][1]);
    if (!wrong.length) return null;
    for (const d of a.depends_on) {
      const own = d in earlier ? earlier[d][0] : null;
      if (own === null || !plausible(own, keysById[d], factor)) return null;
    }
    const target = carriedValue(a, earlier);
    if (target.unknown) trace.unknown = true;
    if (!("value" in target) || !within(value, target.value, a)) return null;
    // an earlier answer handed back unchanged is no carried work
    if (wrong.some((d) => within(target.value, earlier[d][0], a))) return null;
    const parts = wrong.map((d) => keysById[d].variable).join(", ");
    return (
      `Wrong, but consistent with your own earlier answer (${parts}): ` +
      "error carried forward, partial credit."
    );
  }

  function compare(a, text, earlier, keysById, policy, units) {
    const base = { part: a.id, variable: a.variable, points: a.points, expected: shown(a.value, a) };
    const [value, problem] = readValue(a, text, units, policy.plausible_factor);
    if (value === null) {
      const cut = problem.indexOf(":");
      const status = cut < 0 ? problem : problem.slice(0, cut);
      const detail = cut < 0 ? "" : problem.slice(cut + 1);
      const asked = a.unit ? `a number in ${a.unit}` : "a number";
      const feedback = {
        missing: "No answer.",
        wrong_unit: `${detail}.`,
        unreadable: `Could not read your answer: ${detail} (write ${asked}).`,
      }[status];
      return [{ ...base, score: 0, status, feedback, given: "", value: null, misconception: null }, null];
    }
    const given = shown(value, a);
    Object.assign(base, { given, value, misconception: null });
    if (within(value, a.value, a)) return [{ ...base, score: a.points, status: "correct", feedback: "Correct." }, value];
    // compare.py's order: a declared misconception of this part before carried credit
    const misconception = a.misconceptions.find((m) => within(value, m.value, a)) || null;
    if (misconception) {
      return [
        {
          ...base,
          score: a.points * misconception.credit,
          status: "misconception",
          feedback: misconception.feedback,
          misconception: misconception.name,
        },
        value,
      ];
    }
    const trace = {};
    const carriedText = policy.ecf
      ? carried(a, value, earlier, keysById, policy.plausible_factor, trace)
      : null;
    if (trace.unknown) base.ecf_unknown = true;
    if (carriedText !== null) {
      return [{ ...base, score: a.points * policy.ecf_credit, status: "carried", feedback: carriedText }, value];
    }
    return [
      { ...base, score: 0, status: "wrong", feedback: `Not within tolerance.${magnitudeHint(value, a.value)}` },
      value,
    ];
  }

  // autograder/grade.py _grade_answers: the parts in order, intermediates as if right.
  function gradeQuestion(question, texts, policy, units) {
    const keysById = {};
    for (const a of question.answers) keysById[a.id] = a;
    const textOf = (a) => (texts[a.id] === undefined || texts[a.id] === null ? "" : texts[a.id]);
    const asked = question.answers.filter((a) => a.ask);
    const work = showsWork(
      asked.map((a) => {
        const [value] = readValue(a, textOf(a), units, policy.plausible_factor);
        return value === null ? null : value / a.factor;
      })
    );
    const rules = { ...policy, ecf: policy.ecf && work };
    const earlier = {};
    const out = [];
    for (const a of question.answers) {
      if (!a.ask) {
        earlier[a.id] = [a.value, true];
        continue;
      }
      const [verdict, value] = compare(a, textOf(a), earlier, keysById, rules, units);
      earlier[a.id] = [value, verdict.status === "correct"];
      out.push(verdict);
    }
    return out;
  }

  root.ScaleGradeChecker = { gradeQuestion, carriedValue, normalize, readValue, toSI, within, sci, sig, py, InputError };
})(typeof window !== "undefined" ? window : globalThis);
