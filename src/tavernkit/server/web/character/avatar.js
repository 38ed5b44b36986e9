// The character's picture: the avatar as stored, "Change avatar" (a PNG, JPEG or WebP file),
// cropped here in the browser to a card's 2:3 shape on a canvas (zoom and position sliders,
// a live preview) and sent as a PNG of at most 512x768; "Remove avatar". A new character's
// choice waits (`pending()`) until the card is saved.

import { button, h } from "../dom.js";
import { t } from "../i18n.js";

const OUT_W = 512;
const TYPES = "image/png,image/jpeg,image/webp";

// `url`: the current avatar ("" for none); `upload(blob)` stores one and returns the new URL;
// `remove()` removes it; `fail(error)` shows an error that must stay.
export function createAvatar({ name, url, upload, remove, fail }) {
  let current = url;
  let pendingBlob = null;
  const picture = h("div", { class: "avatar-frame" });
  const picker = h("input", { type: "file", accept: TYPES, hidden: true });
  const cropper = h("div", { class: "cropper", hidden: true });
  const removeButton = button(t("Remove avatar"), () => removeAvatar(), { class: "danger" });
  const change = button(t("Change avatar"), () => picker.click());

  function show(src) {
    current = src;
    removeButton.hidden = !src;
    if (!src) {
      picture.replaceChildren(h("span", { class: "initial", "aria-hidden": "true" }, (name() || "?").slice(0, 1)));
      return;
    }
    const img = h("img", { src, alt: t("Avatar of {name}", { name: name() || t("the character") }), width: 200, height: 300 });
    img.addEventListener("error", () => show(""));
    picture.replaceChildren(img);
  }

  async function removeAvatar() {
    try {
      if (pendingBlob) pendingBlob = null;
      else await remove();
      show("");
    } catch (error) {
      fail(error);
    }
  }

  picker.addEventListener("change", async () => {
    const file = picker.files[0];
    picker.value = "";
    if (!file) return;
    let bitmap;
    try {
      bitmap = await createImageBitmap(file);
    } catch {
      fail(new Error(t("{name}: not an image this browser can read (use a PNG, JPEG or WebP file)", { name: file.name })));
      return;
    }
    openCropper(bitmap);
  });

  function openCropper(bitmap) {
    const preview = h("canvas", { width: 160, height: 240, class: "crop-preview", "aria-label": t("Cropped avatar preview"), role: "img" });
    const zoom = h("input", { type: "range", min: 1, max: 4, step: 0.05, value: 1 });
    const across = h("input", { type: "range", min: 0, max: 100, step: 1, value: 50 });
    const down = h("input", { type: "range", min: 0, max: 100, step: 1, value: 50 });

    // The 2:3 rectangle of the image the sliders choose.
    const area = () => {
      const { width: w, height: h2 } = bitmap;
      let cw = w * 3 > h2 * 2 ? (h2 * 2) / 3 : w;
      let ch = cw * 1.5;
      const z = Number(zoom.value) || 1;
      cw /= z;
      ch /= z;
      return {
        sx: ((w - cw) * Number(across.value)) / 100,
        sy: ((h2 - ch) * Number(down.value)) / 100,
        cw,
        ch,
      };
    };
    const draw = (canvas) => {
      const { sx, sy, cw, ch } = area();
      const ctx = canvas.getContext("2d");
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      ctx.imageSmoothingQuality = "high";
      ctx.drawImage(bitmap, sx, sy, cw, ch, 0, 0, canvas.width, canvas.height);
    };
    for (const slider of [zoom, across, down]) slider.addEventListener("input", () => draw(preview));
    draw(preview);

    const close = () => {
      cropper.hidden = true;
      cropper.replaceChildren();
      bitmap.close();
      change.focus();
    };
    const use = button(
      t("Use this avatar"),
      async () => {
        const { cw } = area();
        const out = h("canvas", { width: Math.max(2, Math.min(OUT_W, Math.round(cw))) });
        out.height = Math.round(out.width * 1.5);
        draw(out);
        const blob = await new Promise((resolve) => out.toBlob(resolve, "image/png"));
        use.disabled = true;
        try {
          if (upload) show(await upload(blob));
          else {
            pendingBlob = blob;
            show(URL.createObjectURL(blob));
          }
          close();
        } catch (error) {
          use.disabled = false;
          fail(error);
        }
      },
      { class: "primary" },
    );
    cropper.replaceChildren(
      h("p", { class: "muted" }, t("Crop to the card's shape (2:3):")),
      preview,
      h("label", { class: "field" }, t("Zoom"), zoom),
      h("label", { class: "field" }, t("Left to right"), across),
      h("label", { class: "field" }, t("Top to bottom"), down),
      h("div", { class: "row" }, use, button(t("Cancel"), close)),
    );
    cropper.hidden = false;
    use.focus();
  }

  show(url);
  const node = h(
    "section",
    { class: "avatar-box", "aria-label": t("Avatar") },
    picture,
    h("div", { class: "row" }, change, removeButton),
    picker,
    cropper,
  );
  return {
    node,
    pending: () => pendingBlob,
    refresh: () => {
      if (!current) show("");
    },
  };
}
