// Articles already opened stay readable offline: each one read is kept in
// IndexedDB (the newest 500), and read back when the server is out of reach.
export interface StoredArticle {
  id: string;
  feedId: string;
  title: string;
  link?: string | null;
  pubDate: string;
  unread: boolean;
  starred: boolean;
  createdAt: string;
  content: string;
}

const DB = 'trellis';
const STORE = 'articles';
const KEEP = 500;

function open(): Promise<IDBDatabase | null> {
  if (typeof indexedDB === 'undefined') return Promise.resolve(null);
  return new Promise((resolve) => {
    const request = indexedDB.open(DB, 1);
    request.onupgradeneeded = () => {
      const store = request.result.createObjectStore(STORE, { keyPath: 'id' });
      store.createIndex('savedAt', 'savedAt');
    };
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => resolve(null);
  });
}

let db: Promise<IDBDatabase | null> | null = null;
function database() {
  db ??= open();
  return db;
}

export async function rememberArticle(article: StoredArticle): Promise<void> {
  const handle = await database();
  if (!handle) return;
  const tx = handle.transaction(STORE, 'readwrite');
  const store = tx.objectStore(STORE);
  store.put({ ...article, savedAt: Date.now() });
  const count = store.count();
  count.onsuccess = () => {
    let extra = count.result - KEEP;
    if (extra <= 0) return;
    const cursor = store.index('savedAt').openCursor();
    cursor.onsuccess = () => {
      const at = cursor.result;
      if (!at || extra <= 0) return;
      at.delete();
      extra -= 1;
      at.continue();
    };
  };
}

export async function cachedArticle(id: string): Promise<StoredArticle | null> {
  const handle = await database();
  if (!handle) return null;
  return new Promise((resolve) => {
    const request = handle.transaction(STORE).objectStore(STORE).get(id);
    request.onsuccess = () => resolve((request.result as StoredArticle | undefined) ?? null);
    request.onerror = () => resolve(null);
  });
}

/** Keeps the stored copies' read and starred state as the reader changes them. */
export async function updateStoredArticles(ids: readonly string[], patch: Partial<Pick<StoredArticle, 'unread' | 'starred'>>): Promise<void> {
  const handle = await database();
  if (!handle || !ids.length) return;
  const store = handle.transaction(STORE, 'readwrite').objectStore(STORE);
  for (const id of ids) {
    const request = store.get(id);
    request.onsuccess = () => {
      if (request.result) store.put({ ...request.result, ...patch });
    };
  }
}
