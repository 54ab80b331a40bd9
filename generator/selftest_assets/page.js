/* ScaleGrade self-test page: timer, inputs saved in local storage, check and finish.
 * The grading itself is checker.js; this file only wires it to the page. */
(function () {
  "use strict";
  const C = window.ScaleGradeChecker;
  const pub = JSON.parse(document.getElementById("sg-public").textContent);
  const keyEl = document.getElementById("sg-key");

  // The key is XOR-ed with a key kept beside it, then base64: against accidental reading only.
  function decode(b64, hex) {
    const mask = new Uint8Array(hex.match(/../g).map((h) => parseInt(h, 16)));
    const raw = atob(b64.trim());
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i) ^ mask[i % mask.length];
    return JSON.parse(new TextDecoder("utf-8").decode(bytes));
  }
  const data = decode(keyEl.textContent, keyEl.dataset.k);

  function gradeQuestion(qi, texts) {
    return C.gradeQuestion(data.questions[qi], texts, data.policy, pub.units);
  }

  // --- saved progress ---
  const empty = () => ({ answers: {}, free: {}, self: {}, checked: [], timer: { elapsed: 0, started: null }, finished: false });
  let storageOk = true;
  function load() {
    try {
      const saved = JSON.parse(window.localStorage.getItem(pub.storage) || "null");
      return Object.assign(empty(), saved || {});
    } catch (err) {
      storageOk = false;
      return empty();
    }
  }
  const state = load();
  function save() {
    if (!storageOk) return;
    try {
      window.localStorage.setItem(pub.storage, JSON.stringify(state));
    } catch (err) {
      storageOk = false;
    }
  }

  const sections = Array.from(document.querySelectorAll("section.question"));
  const fmt = (x) => (Math.round(x * 100) / 100).toString();

  // --- inputs ---
  for (const sec of sections) {
    const qi = Number(sec.dataset.q);
    for (const part of sec.querySelectorAll(".part.answer")) {
      const input = part.querySelector("input");
      const k = `${qi}/${part.dataset.a}`;
      if (state.answers[k] !== undefined) input.value = state.answers[k];
      input.addEventListener("input", () => {
        state.answers[k] = input.value;
        save();
      });
      input.addEventListener("keydown", (ev) => {
        if (ev.key === "Enter") check(qi);
      });
    }
    for (const part of sec.querySelectorAll(".part.free")) {
      const area = part.querySelector("textarea");
      const k = `${qi}/${part.dataset.r}`;
      if (state.free[k] !== undefined) area.value = state.free[k];
      area.addEventListener("input", () => {
        state.free[k] = area.value;
        save();
      });
    }
    sec.querySelector("button.check").addEventListener("click", () => check(qi));
  }

  function textsOf(qi) {
    const texts = {};
    for (const part of sections[qi].querySelectorAll(".part.answer")) {
      texts[part.dataset.a] = part.querySelector("input").value;
    }
    return texts;
  }

  const MARK = { correct: "✓", carried: "≈", misconception: "✗", wrong: "✗", wrong_unit: "✗", unreadable: "?", missing: "–" };

  function selfScore(qi, rid) {
    const v = Number(state.self[`${qi}/${rid}`]);
    return isFinite(v) ? v : 0;
  }

  function check(qi) {
    const sec = sections[qi];
    const verdicts = gradeQuestion(qi, textsOf(qi));
    let score = 0;
    let max = 0;
    for (const v of verdicts) {
      const part = sec.querySelector(`.part.answer[data-a="${CSS.escape(v.part)}"]`);
      const mark = part.querySelector(".verdict");
      mark.textContent = `${MARK[v.status] || ""} ${fmt(v.score)}/${fmt(v.points)}`;
      mark.className = `verdict status-${v.status}`;
      mark.dataset.status = v.status;
      mark.dataset.score = String(v.score);
      mark.dataset.misconception = v.misconception || "";
      const read = v.given ? ` Read as ${v.given}.` : "";
      const expected = v.status === "correct" ? "" : ` Expected: ${v.expected}.`;
      part.querySelector(".feedback").textContent = v.feedback + read + expected;
      score += v.score;
      max += v.points;
    }
    const q = data.questions[qi];
    for (const part of sec.querySelectorAll(".part.free")) {
      const rid = part.dataset.r;
      const rubric = q.rubrics[rid];
      const box = part.querySelector(".rubric");
      if (!box.dataset.filled) {
        box.innerHTML =
          `<p><b>Rubric (grade yourself):</b></p>${rubric.html}` +
          `<label>Your points: <input type="number" class="self" min="0" max="${rubric.points}" step="0.5"` +
          ` value="${state.self[`${qi}/${rid}`] || ""}"> / ${fmt(rubric.points)}</label>`;
        box.dataset.filled = "1";
        box.querySelector("input.self").addEventListener("input", (ev) => {
          state.self[`${qi}/${rid}`] = ev.target.value;
          save();
          summarize();
        });
      }
      box.hidden = false;
    }
    sec.querySelector(".qscore").textContent = `${fmt(score)} / ${fmt(max)} checked points`;
    sec.querySelector(".qscore").dataset.score = String(score);
    const sol = sec.querySelector("details.solution");
    sol.querySelector(".solution-body").innerHTML = q.solution_html;
    sol.hidden = false;
    if (!state.checked.includes(qi)) state.checked.push(qi);
    save();
    summarize();
    return verdicts;
  }

  function summarize() {
    let score = 0;
    let max = 0;
    let self = 0;
    let selfMax = 0;
    const rows = [];
    for (const sec of sections) {
      const qi = Number(sec.dataset.q);
      const q = data.questions[qi];
      const auto = q.answers.filter((a) => a.ask).reduce((s, a) => s + a.points, 0);
      const done = state.checked.includes(qi);
      const got = done ? Number(sec.querySelector(".qscore").dataset.score || 0) : 0;
      const rids = Object.keys(q.rubrics);
      const mine = rids.reduce((s, r) => s + selfScore(qi, r), 0);
      const mineMax = rids.reduce((s, r) => s + q.rubrics[r].points, 0);
      score += got;
      max += auto;
      self += mine;
      selfMax += mineMax;
      const title = sec.querySelector("h2").childNodes[0].textContent.trim();
      rows.push(
        `<tr><td><a href="#${sec.id}">${title}</a></td><td>${done ? fmt(got) : "–"} / ${fmt(auto)}</td>` +
          `<td>${mineMax ? `${fmt(mine)} / ${fmt(mineMax)}` : ""}</td></tr>`,
      );
    }
    const running = document.getElementById("running-score");
    running.textContent = state.checked.length ? `checked: ${fmt(score)} / ${fmt(max)}` : "";
    running.dataset.score = String(score);
    const body = document.getElementById("summary-body");
    body.innerHTML =
      `<p class="total" data-score="${score}" data-max="${max}">Checked parts: <b>${fmt(score)} / ${fmt(max)}</b>` +
      (selfMax ? ` · self-assessed: ${fmt(self)} / ${fmt(selfMax)}` : "") +
      ` · time used: ${clock(elapsed())}</p>` +
      `<table><tr><th>question</th><th>checked</th><th>self-assessed</th></tr>${rows.join("")}</table>` +
      "<p>Code parts are graded in the homework notebook, not here.</p>";
  }

  function finish() {
    for (const sec of sections) check(Number(sec.dataset.q));
    pause();
    state.finished = true;
    save();
    summarize();
    const summary = document.getElementById("summary");
    summary.hidden = false;
    return summary;
  }

  // --- the timer ---
  const total = pub.minutes * 60 * 1000;
  const startBtn = document.getElementById("start");
  const pauseBtn = document.getElementById("pause");
  const left = document.getElementById("time-left");
  let ticking = null;

  function elapsed() {
    const t = state.timer;
    return t.elapsed + (t.started !== null ? Date.now() - t.started : 0);
  }
  function clock(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    const h = Math.floor(s / 3600);
    const m = Math.floor((s % 3600) / 60);
    return `${h}:${String(m).padStart(2, "0")}:${String(s % 60).padStart(2, "0")}`;
  }
  function render() {
    const rest = total - elapsed();
    left.textContent = rest > 0 ? clock(rest) : "0:00:00 — time is up";
    left.parentElement.classList.toggle("over", rest <= 0);
    const running = state.timer.started !== null;
    startBtn.disabled = running;
    startBtn.textContent = state.timer.elapsed > 0 && !running ? "Resume" : "Start";
    pauseBtn.disabled = !running;
  }
  function start() {
    if (state.timer.started === null) state.timer.started = Date.now();
    save();
    if (!ticking) ticking = window.setInterval(render, 500);
    render();
  }
  function pause() {
    const t = state.timer;
    if (t.started !== null) {
      t.elapsed += Date.now() - t.started;
      t.started = null;
    }
    if (ticking) window.clearInterval(ticking);
    ticking = null;
    save();
    render();
  }
  startBtn.addEventListener("click", start);
  pauseBtn.addEventListener("click", pause);
  document.getElementById("finish").addEventListener("click", () => {
    finish().scrollIntoView();
  });
  document.getElementById("clear").addEventListener("click", () => {
    if (!window.confirm("Clear every answer and the timer on this page?")) return;
    try {
      window.localStorage.removeItem(pub.storage);
    } catch (err) {
      /* nothing saved */
    }
    window.location.reload();
  });

  // --- restore ---
  for (const qi of state.checked.slice()) check(qi);
  if (state.timer.started !== null) start();
  render();
  if (state.finished) document.getElementById("summary").hidden = false;
  summarize();
  if (!storageOk) {
    document.querySelector(".bar").insertAdjacentHTML("beforeend", '<span class="warn">(this browser does not let the page save your answers)</span>');
  }

  window.ScaleGradeSelfTest = { data, pub, gradeQuestion, check, finish, storageOk: () => storageOk };
})();
