// dbsim's start form on the live page: GET ./form describes the fields (for the chosen target
// kind and workload), POST ./start validates them as `dbsim validate` does and starts the
// run; each error line is shown under the field it names. Same origin only.
(function () {
  "use strict";
  var GROUPS = {
    target: "Target", workload: "Workload and data", load: "Load",
    slo: "Service-level objectives (judged live and at the end)",
  };
  function el(id) { return document.getElementById(id); }
  function idOf(name) { return "f-" + name.replace(/\./g, "-"); }
  function values() {
    var out = {};
    el("start-form").querySelectorAll("input, select").forEach(function (input) {
      out[input.name] = input.value;
    });
    return out;
  }
  function fieldHtml(field) {
    var input;
    if (field.choices.length) {
      input = document.createElement("select");
      field.choices.forEach(function (choice) {
        var option = document.createElement("option");
        option.value = option.textContent = choice;
        input.appendChild(option);
      });
    } else {
      input = document.createElement("input");
      input.type = "text";
      if (field.name === "target.password_env") input.placeholder = "e.g. PGPASSWORD";
    }
    input.name = field.name;
    input.id = idOf(field.name);
    input.value = field.value;
    var row = document.createElement("div");
    row.className = "field";
    row.dataset.field = field.name;
    var label = document.createElement("label");
    label.htmlFor = input.id;
    label.textContent = field.label;
    var hint = document.createElement("span");
    hint.className = "hint";
    hint.textContent = field.help;
    var error = document.createElement("div");
    error.className = "field-error";
    error.dataset.for = field.name;
    [label, input, hint, error].forEach(function (node) { row.appendChild(node); });
    return row;
  }
  function render(fields, keep) {
    var box = el("form-fields");
    box.textContent = "";
    var sets = {};
    fields.forEach(function (field) {
      if (!sets[field.group]) {
        sets[field.group] = document.createElement("fieldset");
        var legend = document.createElement("legend");
        legend.textContent = GROUPS[field.group] || field.group;
        sets[field.group].appendChild(legend);
        box.appendChild(sets[field.group]);
      }
      if (keep && field.group === "load" && keep[field.name] !== undefined) field.value = keep[field.name];
      sets[field.group].appendChild(fieldHtml(field));
    });
    ["target.kind", "workload.name"].forEach(function (name) {
      var select = el(idOf(name));
      if (select) select.addEventListener("change", function () { load(values()); });
    });
  }
  function load(keep) {
    var query = keep ? "?" + new URLSearchParams({
      "target.kind": keep["target.kind"], "workload.name": keep["workload.name"],
    }).toString() : "";
    fetch("./form" + query, { credentials: "same-origin" })
      .then(function (r) { return r.json(); })
      .then(function (data) { render(data.fields, keep); showErrors(data.errors || {}); });
  }
  function showErrors(errors) {
    document.querySelectorAll(".field").forEach(function (row) { row.classList.remove("bad"); });
    document.querySelectorAll(".field-error").forEach(function (node) { node.textContent = ""; });
    Object.keys(errors).forEach(function (name) {
      var target = document.querySelector('.field-error[data-for="' + name + '"]') || el("form-errors");
      target.textContent = (target.textContent ? target.textContent + "\n" : "") + errors[name].join("\n");
      var row = document.querySelector('.field[data-field="' + name + '"]');
      if (row) row.classList.add("bad");
    });
  }
  el("start-form").addEventListener("submit", function (event) {
    event.preventDefault();
    el("start").disabled = true;
    fetch("./start", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(values()),
    }).then(function (r) { return r.json(); }).then(function (data) {
      showErrors(data.errors || {});
      if (data.ok) document.querySelector('nav button[data-tab="charts"]').click();
    }).finally(function () { el("start").disabled = false; });
  });
  el("stop").addEventListener("click", function () {
    el("stop").disabled = true;
    fetch("../stop", { method: "POST", credentials: "same-origin" });
  });
  load(null);
})();
