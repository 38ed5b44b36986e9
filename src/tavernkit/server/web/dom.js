// Building DOM from data without ever parsing markup: h("button", {type: "button"}, "Send").
// Attributes named on* are refused, so no event handler can be written as a string.

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (/^on/i.test(name)) throw new Error(`h(): refusing attribute ${name}`);
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null && child !== false) node.append(child);
  }
  return node;
}

export function button(label, action, attrs = {}) {
  const node = h("button", { type: "button", ...attrs }, label);
  node.addEventListener("click", action);
  return node;
}
