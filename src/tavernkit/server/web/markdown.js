// A strict markdown renderer that builds DOM nodes and never parses HTML: every piece of text
// goes in through createTextNode, so a reply's "<script>", "<img onerror=...>" or any other
// markup is shown as the characters it is. Links keep only http(s) and mailto URLs (checked
// after the browser has parsed them, so "JaVa\tScRiPt:" and entity tricks cannot slip by);
// images are shown as links, never loaded.
//
// Supported: paragraphs, line breaks, # headings, > quotes, - / * / 1. lists, ``` fenced code,
// --- rules; inline `code`, **bold**, *italic* / _italic_, ~~strike~~, [text](url),
// "quoted speech" marked as SillyTavern does, and <b>, <i>, <q>, <br> and a few more formatting
// tags written without attributes (built as elements, their content rendered the same way).

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

export function safeUrl(text) {
  const trimmed = String(text).trim();
  let url;
  try {
    url = new URL(trimmed, window.location.origin);
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

function el(tag, children = []) {
  const node = document.createElement(tag);
  for (const child of children) node.append(child);
  return node;
}

// Inline rules, tried at each position in order; each returns [node, length] or null.
const INLINE = [
  [/^`([^`\n]+)`/, (m) => el("code", [m[1]])],
  [/^!\[([^\]\n]*)\]\(([^)\s]+)\)/, (m) => link(m[2], m[1] || m[2])],
  [/^\[([^\]\n]+)\]\(([^)\s]+)\)/, (m) => link(m[2], m[1])],
  [/^\*\*(?=\S)([\s\S]+?)\*\*/, (m) => el("strong", inline(m[1]))],
  [/^__(?=\S)([\s\S]+?)__/, (m) => el("strong", inline(m[1]))],
  [/^~~(?=\S)([\s\S]+?)~~/, (m) => el("del", inline(m[1]))],
  [/^\*(?=\S)([^*\n]+?)\*/, (m) => el("em", inline(m[1]))],
  [/^_(?=\S)([^_\n]+?)_(?![A-Za-z0-9])/, (m) => el("em", inline(m[1]))],
  [/^"([^"\n]+)"/, (m) => quoted(m[0])],
  [/^“([^”\n]+)”/, (m) => quoted(m[0])],
  [/^\n/, () => el("br")],
  // A few formatting tags without attributes (what display-only regex scripts write, and what
  // SillyTavern's sanitizer lets through), built as elements; any other markup stays text.
  [/^<(b|i|u|s|q|em|strong|del|ins|sub|sup|small|mark|kbd)>([\s\S]*?)<\/\1>/i, (m) => el(m[1].toLowerCase(), inline(m[2]))],
  [/^<br\s*\/?>/i, () => el("br")],
];

function quoted(text) {
  const q = el("q", [text]);
  q.className = "speech";
  return q;
}

function link(target, label) {
  const href = safeUrl(target);
  if (href === null) return document.createTextNode(label);
  const a = el("a", [label]);
  a.href = href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  return a;
}

export function inline(text) {
  const out = [];
  let plain = "";
  let i = 0;
  outer: while (i < text.length) {
    const rest = text.slice(i);
    for (const [pattern, make] of INLINE) {
      // A rule starts only where its first character could start one.
      if (!"`![*_~\"“\n<".includes(rest[0])) break;
      const m = pattern.exec(rest);
      if (m) {
        if (plain) out.push(document.createTextNode(plain));
        plain = "";
        out.push(make(m));
        i += m[0].length;
        continue outer;
      }
    }
    plain += text[i];
    i += 1;
  }
  if (plain) out.push(document.createTextNode(plain));
  return out;
}

const LIST_ITEM = /^\s{0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/;

// Render `source` into a DocumentFragment.
export function render(source) {
  const fragment = document.createDocumentFragment();
  const lines = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) fragment.append(el("p", inline(paragraph.join("\n"))));
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*```\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const body = [];
      for (i += 1; i < lines.length && !/^\s*```\s*$/.test(lines[i]); i++) body.push(lines[i]);
      const code = el("code", [body.join("\n")]);
      if (fence[1]) code.dataset.lang = fence[1];
      fragment.append(el("pre", [code]));
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      fragment.append(el(`h${heading[1].length}`, inline(heading[2])));
      continue;
    }
    if (/^\s{0,3}([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      fragment.append(el("hr"));
      continue;
    }
    if (/^\s{0,3}>/.test(line)) {
      flush();
      const quoted = [];
      for (; i < lines.length && /^\s{0,3}>/.test(lines[i]); i++) {
        quoted.push(lines[i].replace(/^\s{0,3}>\s?/, ""));
      }
      i -= 1;
      const block = el("blockquote");
      block.append(render(quoted.join("\n")));
      fragment.append(block);
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      flush();
      const ordered = /\d/.test(item[1]);
      const list = el(ordered ? "ol" : "ul");
      for (; i < lines.length; i++) {
        const m = LIST_ITEM.exec(lines[i]);
        if (!m || /\d/.test(m[1]) !== ordered) break;
        list.append(el("li", inline(m[2])));
      }
      i -= 1;
      fragment.append(list);
      continue;
    }
    paragraph.push(line);
  }
  flush();
  return fragment;
}
