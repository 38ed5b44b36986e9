// The page header's nav (index.html). On a desktop its links sit in the header's one row. On a
// phone (under 720px, style.css) they do not fit, and a row that scrolls sideways hid Settings
// past the edge: there the header shows the brand and a "Menu" button, and the same nav drops
// from the header as a panel over the page. The header stays one row (the chat's side panel is
// placed under it). The Menu button is display:none on a desktop, so nothing is read twice.
//
// The panel closes when a link is chosen, on Escape (focus back on the button), on a tap
// outside it (the tap does nothing else: it was meant to close the menu, not to press what lay
// under it), when focus leaves it, and on a second press of Menu.

const PHONE = window.matchMedia("(max-width: 720px)");

// A screen -> the nav link of the list it belongs to (a lorebook's editor -> Lorebooks).
const SECTION = {
  character: "#/",
  preset: "#/presets",
  textgen: "#/presets",
  lorebook: "#/lorebooks",
  group: "#/groups",
};

const header = document.querySelector("header.top");
const nav = document.getElementById("site-nav");
const toggle = document.getElementById("menu");

function isOpen() {
  return toggle.getAttribute("aria-expanded") === "true";
}

function setOpen(open) {
  toggle.setAttribute("aria-expanded", String(open));
  header.classList.toggle("menu-open", open);
}

export function closeMenu({ focusButton = false } = {}) {
  if (!isOpen()) return;
  setOpen(false);
  if (focusButton) toggle.focus();
}

// Marks the link of the screen shown: aria-current="page" on its own list's link, "true" on the
// list a detail screen belongs to (a lorebook's editor marks Lorebooks).
export function markCurrent(screen) {
  const own = `#/${screen}`;
  const section = SECTION[screen];
  for (const link of nav.querySelectorAll("a")) {
    const href = link.getAttribute("href");
    if (href === own) link.setAttribute("aria-current", "page");
    else if (href === section) link.setAttribute("aria-current", "true");
    else link.removeAttribute("aria-current");
  }
}

function outside(target) {
  return !nav.contains(target) && !toggle.contains(target);
}

export function setUpNav() {
  toggle.addEventListener("click", () => setOpen(!isOpen()));
  nav.addEventListener("click", (event) => {
    if (event.target.closest("a")) closeMenu();
  });
  // capture: the menu lies over the page, so its Escape is the only one that acts
  document.addEventListener(
    "keydown",
    (event) => {
      if (event.key !== "Escape" || !isOpen()) return;
      event.preventDefault();
      event.stopPropagation();
      closeMenu({ focusButton: true });
    },
    true,
  );
  // A tap outside closes the menu on its pointerdown (before the focus moves, which would close
  // it too), and its click is swallowed: the tap was meant to close the menu, not to press what
  // lay under it. Capture: before anything under the tap sees it.
  let swallowClick = false;
  document.addEventListener(
    "pointerdown",
    (event) => {
      swallowClick = isOpen() && outside(event.target);
      if (swallowClick) closeMenu();
    },
    true,
  );
  // a tap that became a scroll gives no click: the next click (a key's, say) is not this tap's
  const forget = () => {
    swallowClick = false;
  };
  document.addEventListener("pointercancel", forget, true);
  document.addEventListener("keydown", forget, true);
  document.addEventListener(
    "click",
    (event) => {
      if (!swallowClick) return;
      swallowClick = false;
      event.preventDefault();
      event.stopPropagation();
    },
    true,
  );
  header.addEventListener("focusout", (event) => {
    if (isOpen() && event.relatedTarget && outside(event.relatedTarget)) closeMenu();
  });
  window.addEventListener("hashchange", () => closeMenu());
  PHONE.addEventListener("change", () => closeMenu());
}
