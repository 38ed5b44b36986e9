// The message box, its image attachments and the turn buttons. Enter sends, Shift+Enter is a
// new line, Escape stops the running turn. `on`: {send(text, images), stop(), turn(kind)}.

import { button, h } from "../dom.js";
import { reportError } from "../toast.js";
import { t } from "../i18n.js";

const LONGEST_SIDE = 1568; // what vision models take without scaling again (Claude's advice)
const MOST_IMAGES = 8;

// An image file as a data: URL, scaled down in the browser when it is larger than a model uses.
async function imageUrl(file) {
  const bitmap = await createImageBitmap(file);
  const scale = Math.min(1, LONGEST_SIDE / Math.max(bitmap.width, bitmap.height));
  if (scale === 1 && file.size < 1_500_000) {
    return new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result));
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });
  }
  const canvas = document.createElement("canvas");
  canvas.width = Math.round(bitmap.width * scale);
  canvas.height = Math.round(bitmap.height * scale);
  canvas.getContext("2d").drawImage(bitmap, 0, 0, canvas.width, canvas.height);
  return canvas.toDataURL("image/jpeg", 0.9);
}

export function createComposer(on) {
  let images = []; // data: URLs
  const placeholder = t("Type a message (Enter sends, Shift+Enter for a new line)");
  const input = h("textarea", { rows: 2, placeholder, "aria-label": t("Message") });
  const picker = h("input", { type: "file", accept: "image/*", multiple: true, hidden: true });
  const previews = h("ul", { class: "attachments", "aria-label": t("Attached images") });
  const stop = button(t("Stop"), () => on.stop(), { disabled: true, class: "danger" });
  const sendNow = () => on.send(input.value, images);

  function showImages() {
    previews.replaceChildren(
      ...images.map((url, i) =>
        h(
          "li",
          {},
          h("img", { src: url, alt: t("attached image {value}", { value: i + 1 }) }),
          button(t("Remove"), () => {
            images = images.filter((_, j) => j !== i);
            showImages();
          }, { "aria-label": t("Remove image {value}", { value: i + 1 }) }),
        ),
      ),
    );
    previews.hidden = !images.length;
  }

  picker.addEventListener("change", async () => {
    try {
      for (const file of [...picker.files].slice(0, MOST_IMAGES - images.length)) images.push(await imageUrl(file));
    } catch (error) {
      reportError(error);
    }
    picker.value = "";
    showImages();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      sendNow();
    } else if (event.key === "Escape") {
      on.stop();
    }
  });
  showImages();
  const node = h(
    "div",
    { class: "composer" },
    previews,
    input,
    picker,
    h(
      "div",
      { class: "row" },
      button(t("Send"), sendNow, { class: "primary" }),
      stop,
      button(t("Regenerate"), () => on.turn("regenerate")),
      button(t("Continue"), () => on.turn("continue")),
      button(t("Impersonate"), () => on.turn("impersonate")),
      button(t("Attach image"), () => picker.click()),
    ),
  );
  return {
    node,
    focus: () => input.focus(),
    text: () => input.value,
    // Put `text` in the box (an impersonation streaming in, a send that was refused).
    setText(text) {
      input.value = text;
    },
    setImages(list) {
      images = [...list];
      showImages();
    },
    // Name the persona the next message is sent as ("": the user's own name, said nowhere).
    speakingAs(name) {
      input.placeholder = name ? t("Message as {name} (Enter sends, Shift+Enter for a new line)", { name }) : placeholder;
    },
    running(yes) {
      stop.disabled = !yes;
    },
  };
}
