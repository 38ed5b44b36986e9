// Importing many files at once (a folder of thousands of cards): a few files a request to
// POST /import/each, which answers each file's outcome on its own, so one unreadable file or
// one taken name never stops the rest; progress is reported between requests. Also the files
// of a drop, folders walked (a dropped folder is one entry, not its files).

import { api } from "./api.js";

// a request carries at most this many files and (but for one bigger file alone) this many bytes
const BATCH_FILES = 20;
const BATCH_BYTES = 8 * 1024 * 1024;

export function batchesOf(files) {
  const batches = [];
  let batch = [];
  let bytes = 0;
  for (const file of files) {
    if (batch.length && (batch.length >= BATCH_FILES || bytes + file.size > BATCH_BYTES)) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(file);
    bytes += file.size;
  }
  if (batch.length) batches.push(batch);
  return batches;
}

// hidden files a folder carries (.DS_Store, ._name): never something to import
const shown = (file) => !file.name.startsWith(".");

// Imports `files`; `progress(done, total)` after each request. Answers {imported, failed}:
// the server's import results, and [{file, error: {type, message}}] for each file refused.
export async function importEach(files, { replace = false, progress = () => {} } = {}) {
  // in the order of their paths, numbers counted (card-2 before card-10), not the browser's
  const path = (file) => file.webkitRelativePath || file.name;
  const wanted = [...files]
    .filter(shown)
    .sort((a, b) => path(a).localeCompare(path(b), undefined, { numeric: true }));
  const imported = [];
  const failed = [];
  let done = 0;
  progress(done, wanted.length);
  for (const batch of batchesOf(wanted)) {
    const form = new FormData();
    for (const file of batch) form.append("file", file, path(file));
    const outcomes = await api("POST", `/import/each${replace ? "?replace=true" : ""}`, form);
    outcomes.forEach((outcome, i) => {
      if (outcome.error) failed.push({ file: batch[i], error: outcome.error });
      else imported.push(...outcome.imported);
    });
    done += batch.length;
    progress(done, wanted.length);
  }
  return { imported, failed };
}

// The files of a drop, each dropped folder walked to its files (in the browser's order).
export async function droppedFiles(dataTransfer) {
  const entries = [...dataTransfer.items]
    .map((item) => (item.webkitGetAsEntry ? item.webkitGetAsEntry() : null))
    .filter(Boolean);
  if (!entries.length) return [...dataTransfer.files];
  const files = [];
  for (const entry of entries) files.push(...(await filesUnder(entry)));
  return files;
}

async function filesUnder(entry) {
  if (entry.isFile) return [await new Promise((resolve, reject) => entry.file(resolve, reject))];
  const reader = entry.createReader();
  const files = [];
  // readEntries answers a part of a big folder at a time, then an empty list
  for (;;) {
    const part = await new Promise((resolve, reject) => reader.readEntries(resolve, reject));
    if (!part.length) return files;
    for (const child of part) files.push(...(await filesUnder(child)));
  }
}
