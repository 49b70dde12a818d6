// Trellis service worker: the app keeps working offline.
// - `/assets/…` are content-hashed and immutable: cache first, kept.
// - Page loads (navigations): the network, else the cached app shell.
// - The API is never cached here; the app keeps loaded articles and queues
//   read/star changes itself (src/offline/).
// Lookups ignore `Vary`: the server varies on `Origin`, which the page's
// module scripts send (they load in CORS mode) and the worker's own fetches
// at install do not, so a strict lookup missed every asset offline. A
// hashed asset, and the shell, are the same whoever asks.
const SHELL = 'trellis-shell-v1';
const ASSETS = 'trellis-assets-v1';

self.addEventListener('install', (event) => {
  event.waitUntil(
    (async () => {
      const cache = await caches.open(SHELL);
      const response = await fetch('/', { headers: { accept: 'text/html' }, cache: 'no-cache' });
      if (!response.ok) return;
      const html = await response.clone().text();
      await cache.put('/', response);
      // The app's own scripts and styles, as the page names them.
      const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((match) => match[1]);
      const store = await caches.open(ASSETS);
      await Promise.all(assets.map((url) => store.add(url).catch(() => undefined)));
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener('fetch', (event) => {
  const request = event.request;
  if (request.method !== 'GET') return;
  const url = new URL(request.url);
  if (url.origin !== self.location.origin) return;
  if (url.pathname.startsWith('/assets/')) {
    event.respondWith(
      (async () => {
        const store = await caches.open(ASSETS);
        const hit = await store.match(request, { ignoreVary: true });
        if (hit) return hit;
        const response = await fetch(request);
        if (response.ok) await store.put(request, response.clone());
        return response;
      })(),
    );
    return;
  }
  if (request.mode === 'navigate' && url.pathname !== '/graphql') {
    event.respondWith(
      (async () => {
        try {
          const response = await fetch(request);
          if (response.ok) {
            const cache = await caches.open(SHELL);
            await cache.put('/', response.clone());
          }
          return response;
        } catch {
          const cache = await caches.open(SHELL);
          return (await cache.match('/', { ignoreVary: true })) ?? Response.error();
        }
      })(),
    );
  }
});
