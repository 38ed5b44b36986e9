// The service worker (served at /sw.js, so its scope is the whole origin): it keeps the UI's
// shell (the page, its scripts, styles, language catalogues, icons and manifest) in a cache so an installed app
// opens without the server, to the "server unreachable" screen (offline.js). It never caches
// API data: only GET requests for "/" and the static files under /ui/ (the names the server's
// static routes serve: one folder level, a file suffix) are answered here; every other
// request (the API, the UI's own /ui/... routes, event streams) goes to the network as if
// there were no worker. Network first: online, the UI is always the server's current one
// (each answer refreshes the cache); offline, the cached copy.

const CACHE = "tavernkit-shell-v1";
const SHELL_FILE = /^\/(ui\/([\w-]+\/)?[\w.-]+\.(js|json|css|png|svg|webmanifest))?$/;

self.addEventListener("install", (event) => {
  event.waitUntil(
    (async () => {
      // the server lists its shell files (GET /shell.json), so a first visit caches all of them
      const listing = await fetch("/shell.json", { cache: "no-store" });
      const { files } = await listing.json();
      const cache = await caches.open(CACHE);
      await cache.addAll(files);
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name !== CACHE) await caches.delete(name);
      }
      await self.clients.claim();
    })(),
  );
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  if (event.request.method !== "GET" || url.origin !== self.location.origin) return;
  if (!SHELL_FILE.test(url.pathname)) return; // API data: never cached, never answered here
  event.respondWith(networkFirst(event.request, url.pathname));
});

async function networkFirst(request, key) {
  const cache = await caches.open(CACHE);
  try {
    const response = await fetch(request);
    if (response.ok) await cache.put(key, response.clone());
    return response;
  } catch (error) {
    const cached = await cache.match(key);
    if (cached) return cached;
    throw error;
  }
}
