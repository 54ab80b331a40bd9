// The marking page's keyboard shortcuts, as the page lists them (a file, not an inline
// script: the Content-Security-Policy runs scripts from this site only).
//
// Ctrl+Enter (or Cmd+Enter) saves, from anywhere.  Single keys act only outside the
// fields, and only while the page's "single-key shortcuts" box is ticked (WCAG 2.1.4: they
// can be turned off; the choice is kept in this browser): a digit puts that score in the
// score field and moves there, "c" moves to the comment, "n" skips to the next unmarked part.
(function () {
  "use strict";
  var form = document.getElementById("mark-form");
  if (!form) {
    return;
  }
  var score = document.getElementById("score");
  var comment = document.getElementById("comment");
  var skip = document.getElementById("next-unmarked");
  var toggle = document.getElementById("single-keys");
  var KEPT = "scalegrade.marking.single-keys";

  try {
    toggle.checked = window.localStorage.getItem(KEPT) !== "off";
  } catch (e) {
    // storage refused (private mode): the shortcuts stay on for this page
  }
  toggle.addEventListener("change", function () {
    try {
      window.localStorage.setItem(KEPT, toggle.checked ? "on" : "off");
    } catch (e) {
      // nothing kept; the box still decides for this page
    }
  });

  function typing(el) {
    if (!el) {
      return false;
    }
    var tag = el.tagName;
    return tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable ||
      (tag === "INPUT" && el.type !== "checkbox" && el.type !== "hidden");
  }

  document.addEventListener("keydown", function (ev) {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") {
      ev.preventDefault();
      if (form.requestSubmit) {
        form.requestSubmit();
      } else {
        form.submit();
      }
      return;
    }
    if (!toggle.checked || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) {
      return;
    }
    if (/^[0-9]$/.test(ev.key)) {
      ev.preventDefault();
      score.value = ev.key;
      score.focus();
      score.setSelectionRange(score.value.length, score.value.length);
    } else if (ev.key === "c") {
      ev.preventDefault();
      comment.focus();
    } else if (ev.key === "n" && skip) {
      ev.preventDefault();
      window.location.assign(skip.href);
    }
  });
})();
