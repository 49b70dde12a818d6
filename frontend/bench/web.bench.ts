// The web client's benchmark: bundle sizes, first paint and "reader usable"
// on loopback (median of 5), long tasks, a 10,000-item list (rows in the
// DOM, first render, frame times while scrolling), j/k response, a node
// status change from commit to paint under 1,000 leaf status changes a
// second, and Lighthouse (mobile). Set TRELLIS_BIN to the release server
// (`target/release/trellis`) for figures comparable with docs/benchmarks.md. Figures are
// printed and written to bench/results/web.json; docs/benchmarks.md quotes them.
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, test } from 'vitest';
import type { Browser, BrowserContext } from 'playwright-core';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, FeedServer, cookieOf, gql, launchBrowser, signIn, startServer, type TrellisServer } from '../e2e/harness';

const ITEMS = 10_000;
const RUNS = 5;
const results: Record<string, unknown> = {};
let server: TrellisServer;
let browser: Browser;
let publisher: FeedServer;
let cookie: string;
let cookies: Awaited<ReturnType<BrowserContext['cookies']>>;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const percentile = (values: number[], p: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor((values.length - 1) * p))];
const round = (value: number) => Math.round(value * 10) / 10;

/** A signed-in page of its own, with the in-page probe. */
async function benchPage() {
  const context = await browser.newContext({ baseURL: server.url, viewport: { width: 1280, height: 800 } });
  await context.addCookies(cookies);
  await context.addInitScript(PROBE);
  return { context, page: await context.newPage() };
}

/** Opens the reader on every article and waits for the first row. */
async function openReader() {
  const opened = await benchPage();
  await opened.page.goto('/read?show=all');
  await opened.page.waitForSelector('.item-row');
  return opened;
}

function record(name: string, value: unknown) {
  results[name] = value;
  console.log(`${name}: ${JSON.stringify(value)}`);
}

// Timings gathered inside the page: paint entries, long tasks, the first
// item row, keyboard-to-paint.
const PROBE = `
  window.__bench = { longTasks: [], firstRow: null, keys: [] };
  new PerformanceObserver((list) => { for (const entry of list.getEntries()) window.__bench.longTasks.push({ start: entry.startTime, duration: entry.duration }); })
    .observe({ type: 'longtask', buffered: true });
  new MutationObserver(() => {
    if (window.__bench.firstRow === null && document.querySelector('.item-row')) window.__bench.firstRow = performance.now();
  }).observe(document, { childList: true, subtree: true });
`;

beforeAll(async () => {
  publisher = await new FeedServer('Bench Daily').start();
  publisher.add(ITEMS, 'Bench story');
  server = await startServer();
  browser = await launchBrowser();
  const context = await browser.newContext({ baseURL: server.url });
  const page = await context.newPage();
  await signIn(page);
  cookie = await cookieOf(context);
  cookies = await context.cookies();
  await context.close();
  const created = await gql<{ createFeed: { id: string } }>(server, 'mutation($l: String!) { createFeed(input: { link: $l }) { id } }', { l: `${publisher.url}/feed.xml` }, cookie);
  // The first pull is due at once: wait until every item is stored.
  for (;;) {
    const feed = await gql<{ feed: { itemCount: number } }>(server, 'query($id: ID!) { feed(id: $id) { itemCount } }', { id: created.createFeed.id }, cookie);
    if (feed.feed.itemCount >= ITEMS) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  await publisher?.stop();
  await mkdir(new URL('./results/', import.meta.url), { recursive: true });
  await writeFile(new URL('./results/web.json', import.meta.url), JSON.stringify(results, null, 2));
});

test('bundle sizes', async () => {
  const dist = new URL('../dist/', import.meta.url).pathname;
  const manifest = JSON.parse(await readFile(join(dist, '.vite/manifest.json'), 'utf8')) as Record<string, { file: string; imports?: string[]; css?: string[] }>;
  const seen = new Set<string>();
  const walk = (key: string) => {
    if (seen.has(key)) return;
    seen.add(key);
    for (const next of manifest[key]?.imports ?? []) walk(next);
  };
  walk('index.html');
  // The reader is a chunk of its own, asked for at start.
  walk(Object.keys(manifest).find((key) => (manifest[key] as { name?: string }).name === 'Reader')!);
  const chunks = [...seen].map((key) => manifest[key]);
  const gz = async (file: string) => gzipSync(await readFile(join(dist, file)), { level: 9 }).length;
  let js = 0;
  for (const chunk of chunks) js += await gz(chunk.file);
  let css = 0;
  for (const file of new Set(chunks.flatMap((chunk) => chunk.css ?? []))) css += await gz(file);
  const fonts = (await readdir(join(dist, 'assets'))).filter((name) => /\.(woff2?|ttf|otf)$/.test(name)).length;
  // The article pane's chunk and what it adds (DOMPurify), loaded on first open.
  const articleKey = Object.keys(manifest).find((key) => manifest[key].file.includes('Article'));
  const before = new Set(seen);
  if (articleKey) walk(articleKey);
  const articleFiles = [...seen].filter((key) => !before.has(key)).map((key) => manifest[key].file);
  record('entry + reader JS, gzip (kB)', round(js / 1000));
  record('app CSS, gzip (kB)', round(css / 1000));
  let article = 0;
  for (const file of articleFiles) article += await gz(file);
  record('article chunk (DOMPurify), gzip (kB)', articleFiles.length ? round(article / 1000) : null);
  record('web fonts', fonts);
});

test('first paint and reader usable, loopback, median of 5', async () => {
  const fcp: number[] = [];
  const usable: number[] = [];
  const longest: number[] = [];
  const tasks: string[] = [];
  for (let run = 0; run < RUNS; run += 1) {
    const { context, page } = await openReader();
    const timings = await page.evaluate(() => ({
      fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
      firstRow: (window as any).__bench.firstRow as number,
      longTasks: (window as any).__bench.longTasks as { start: number; duration: number }[],
    }));
    fcp.push(timings.fcp ?? NaN);
    usable.push(timings.firstRow);
    longest.push(Math.max(0, ...timings.longTasks.map((task) => task.duration)));
    tasks.push(timings.longTasks.map((task) => `${Math.round(task.duration)} ms at ${Math.round(task.start)}`).join(', ') || 'none');
    await context.close();
  }
  record('first contentful paint, median (ms)', round(median(fcp)));
  record('reader usable (first article row), median (ms)', round(median(usable)));
  record('longest task during load, worst of 5 (ms)', round(Math.max(...longest)));
  record('long tasks during load, each run (duration at start, ms since navigation)', tasks);
});

test('10,000-item list: DOM rows, first render, scrolling frames, j/k', async () => {
  const { context, page } = await openReader();
  // The list's first render: from the last API answer before its first row
  // (its first page of items) to that row in the DOM.
  const first = await page.evaluate(() => {
    const row = (window as any).__bench.firstRow as number;
    const answers = (performance.getEntriesByType('resource') as PerformanceResourceTiming[])
      .filter((entry) => entry.name.endsWith('/graphql') && entry.responseEnd <= row)
      .map((entry) => entry.responseEnd);
    return { row, arrived: answers.length ? Math.max(...answers) : null };
  });
  record('first rows of the list in the DOM (ms since navigation)', round(first.row));
  record('first render of the list (its first page arrived → first row in the DOM, ms)', first.arrived === null ? null : round(first.row - first.arrived));
  // Scroll to the end, page by page, as a reader flinging through: every frame's time.
  const scroll = await page.evaluate(async (total) => {
    const list = document.querySelector('.list-scroll') as HTMLElement;
    const frames: number[] = [];
    let maxRows = 0;
    let last = performance.now();
    const deadline = last + 120_000;
    while (document.querySelectorAll('.item-row').length && performance.now() < deadline) {
      list.scrollTop += 900;
      await new Promise((resolve) => requestAnimationFrame(resolve));
      const now = performance.now();
      frames.push(now - last);
      last = now;
      maxRows = Math.max(maxRows, document.querySelectorAll('.item-row').length);
      const loaded = Number(document.querySelector('.list-inner')?.getAttribute('style')?.match(/height: (\d+)/)?.[1] ?? 0) / 64;
      if (loaded >= total && list.scrollTop + list.clientHeight >= list.scrollHeight - 2) break;
    }
    return { frames, maxRows, reached: Math.round(list.scrollTop / 64) };
  }, ITEMS);
  record('rows in the DOM, most at once', scroll.maxRows);
  record('rows scrolled through', scroll.reached);
  record('scrolling frame time p95 (ms)', round(percentile(scroll.frames, 0.95)));
  record('scrolling frame time max (ms)', round(Math.max(...scroll.frames)));
  // j: keydown to the next frame after the selection moved.
  await page.evaluate(() => (document.querySelector('.list-scroll') as HTMLElement).scrollTo(0, 0));
  // The list re-renders at its top on the scroll event: wait for its first row.
  await page.waitForFunction(() => (document.querySelector('.item-row') as HTMLElement | null)?.style.transform === 'translateY(0px)');
  const keys: number[] = [];
  const work: number[] = [];
  let missed = 0;
  let inFirstFrame = 0;
  for (let n = 0; n < 30; n += 1) {
    const elapsed = await page.evaluate(
      (key) =>
        new Promise<{ painted: number; changed: number; firstFrame: boolean }>((resolve) => {
          const selected = () => document.querySelector('[role=option][aria-selected=true]')?.id ?? null;
          const before = selected();
          const start = performance.now();
          let firstFrame = false;
          const observer = new MutationObserver(() => {
            const now = document.querySelector('[role=option][aria-selected=true]')?.id ?? null;
            if (now !== before) {
              observer.disconnect();
              const changed = performance.now() - start;
              requestAnimationFrame(() => resolve({ painted: performance.now() - start, changed, firstFrame }));
            }
          });
          observer.observe(document.body, { attributes: true, subtree: true, attributeFilter: ['aria-selected'] });
          document.body.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true }));
          // The first frame after the key: its animation-frame callbacks run
          // (ours after any the key's handler asked for) before it is
          // styled and painted, so a selection in the DOM here is in it.
          requestAnimationFrame(() => {
            firstFrame = selected() !== before;
          });
          // A press whose selection never shows is counted, not waited for.
          setTimeout(() => {
            observer.disconnect();
            resolve({ painted: NaN, changed: NaN, firstFrame: false });
          }, 5_000);
        }),
      n % 3 === 2 ? 'k' : 'j',
    );
    if (Number.isNaN(elapsed.painted)) missed += 1;
    else {
      if (elapsed.firstFrame) inFirstFrame += 1;
      keys.push(elapsed.painted);
      work.push(elapsed.changed);
    }
  }
  record('j/k presses whose selection did not show within 5 s', missed);
  record('j/k presses painted in the first frame after the key (of 30)', inFirstFrame);
  // The first frame after the key starts at most one frame (16.7 ms at
  // 60 Hz) after it when the key's work fits in that frame.
  record('j/k to painted selection (the next frame starts), p95 (ms)', round(percentile(keys, 0.95)));
  record('j/k to painted selection, max (ms)', round(Math.max(...keys)));
  record('j/k key to selection in the DOM (work before the frame), p95 (ms)', round(percentile(work, 0.95)));
  await context.close();
});

// The live tree under load: LOAD_RESOURCES instances beside a marker node
// in one service (so load rows are on screen). The load is LOAD_EVENTS leaf
// status changes a second: Update C requests through the HTTP API, each
// replacing LOAD_BATCH of them with a new health, so every replaced leaf's
// status changes. Meanwhile the marker's own change (Update A) is timed from
// its task's end (the commit) to the frame after its row shows the new
// label. The page's frames are timed, and the status events the page
// actually received are counted.
const LOAD_RESOURCES = 300;
const LOAD_EVENTS = 1_000;
const LOAD_BATCH = 100;
const LOAD_MAX_SECONDS = 90;
const MARKER_CHANGES = 20;
/** Between two marker changes, so the load runs for about ten seconds. */
const MARKER_PAUSE_MS = 450;
const PLACE = { region: 'eu', zone: 'a', cluster: 'k', namespace: 'n', service: 's' };
const loadInstance = (n: number) => `load-${String(n).padStart(3, '0')}`;

/** A POST to the plain-HTTP resources API with the session cookie. */
async function postResource(path: string, body: object): Promise<{ task_id: string }> {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie, 'Idempotency-Key': crypto.randomUUID() },
    body: JSON.stringify(body),
  });
  if (response.status !== 202) throw new Error(`${path}: HTTP ${response.status} ${await response.text()}`);
  return (await response.json()) as { task_id: string };
}

async function taskOf(id: string) {
  const data = await gql<{ task: { status: string; finishedAt: string | null } }>(server, 'query($id: ID!) { task(id: $id) { status finishedAt } }', { id }, cookie);
  return data.task;
}

async function waitTask(id: string) {
  for (;;) {
    const task = await taskOf(id);
    if (task.finishedAt) return task;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Replaces LOAD_BATCH load resources at a time, `perSecond` replacements a second, until stopped (bounded in time). */
function startLoad(ids: string[], perSecond: number) {
  let stopped = false;
  let batches = 0;
  let accepted = 0;
  let failed = 0;
  let inFlight = 0;
  let lastTask: string | null = null;
  const started = performance.now();
  const done = (async () => {
    const deadline = started + LOAD_MAX_SECONDS * 1000;
    while (!stopped && performance.now() < deadline) {
      // Catch up to the schedule: replacements so far should be rate × elapsed.
      const due = Math.floor((((performance.now() - started) / 1000) * perSecond) / LOAD_BATCH);
      while (batches < due && inFlight < 64) {
        const first = batches * LOAD_BATCH;
        const replacements = Array.from({ length: LOAD_BATCH }, (_, k) => {
          const n = (first + k) % ids.length;
          // Each pass over the resources moves every one to the next health.
          const health = Math.floor((first + k) / ids.length) % 4;
          return { id: ids[n], attributes: { ...PLACE, instance: loadInstance(n), health } };
        });
        const [head, ...others] = replacements;
        batches += 1;
        inFlight += 1;
        postResource(`/resources/${head.id}/update-c`, { attributes: head.attributes, others })
          .then((task) => {
            accepted += 1;
            lastTask = task.task_id;
          })
          .catch(() => (failed += 1))
          .finally(() => (inFlight -= 1));
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    while (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      const seconds = (performance.now() - started) / 1000;
      return { batches, accepted, failed, seconds, lastTask };
    },
  };
}

test('node status change under load: commit to paint on the live tree', async () => {
  const { context, page } = await benchPage();
  const marker = await postResource('/resources', { attributes: { ...PLACE, instance: 'marker', health: 0 } });
  const load: string[] = [];
  for (let n = 0; n < LOAD_RESOURCES; n += 1) {
    load.push((await postResource('/resources', { attributes: { ...PLACE, instance: loadInstance(n), health: 0 } })).task_id);
  }
  await waitTask(marker.task_id);
  await waitTask(load[load.length - 1]);
  const leaf = await gql<{ nodes: { nodes: { id: string; positionToken: string }[] } }>(server, '{ nodes(filter: { class: "instance" }) { nodes { id positionToken } } }', {}, cookie);
  const markerNode = leaf.nodes.nodes.find((node) => node.positionToken === 'marker')!;
  // Count the status events the page receives over its socket.
  let events = 0;
  page.on('websocket', (socket) => {
    socket.on('framereceived', (frame) => {
      const text = typeof frame.payload === 'string' ? frame.payload : frame.payload.toString();
      if (text.includes('nodeStatusChanged')) events += 1;
    });
  });
  // When each status event naming the marker reaches the page, before the
  // app sees it: commit to arrival is the server's part, arrival to paint the page's.
  await page.addInitScript((id) => {
    const w = window as any;
    w.__markerArrivals = [];
    const Native = WebSocket;
    w.WebSocket = class extends Native {
      constructor(...args: ConstructorParameters<typeof WebSocket>) {
        super(...args);
        this.addEventListener('message', (event) => {
          if (typeof event.data !== 'string' || !event.data.includes(`"id":"${id}"`)) return;
          const status = /"aggregatedStatus":(\d+)/.exec(event.data)?.[1];
          if (status !== undefined) w.__markerArrivals.push({ status: Number(status), at: Date.now() });
        });
      }
    };
  }, markerNode.id);
  await page.goto(`/live/node/${markerNode.id}`);
  await page.waitForSelector('[role=treeitem][aria-label^="marker,"]');
  // Every frame's time while the load runs, and the long tasks.
  await page.evaluate(() => {
    const w = window as any;
    w.__frames = [];
    w.__frameLongTasks = [];
    w.__framing = true;
    let last = performance.now();
    const tick = (now: number) => {
      w.__frames.push(now - last);
      last = now;
      if (w.__framing) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) w.__frameLongTasks.push(entry.duration);
    }).observe({ type: 'longtask' });
  });
  const eventsBefore = events;
  const generator = startLoad(load, LOAD_EVENTS);
  const latencies: number[] = [];
  const delivery: number[] = [];
  const onPage: number[] = [];
  for (let n = 1; n <= MARKER_CHANGES; n += 1) {
    const label = ['healthy', 'degraded', 'failing', 'down'][n % 4];
    const painted = page.evaluate(
      (want) =>
        new Promise<number>((resolve) => {
          const observer = new MutationObserver(() => {
            if (document.querySelector(`[role=treeitem][aria-label="marker, instance, ${want}"]`)) {
              observer.disconnect();
              requestAnimationFrame(() => resolve(Date.now()));
            }
          });
          observer.observe(document.body, { attributes: true, subtree: true, childList: true });
        }),
      label,
    );
    const posted = Date.now();
    const task = await postResource(`/resources/${marker.task_id}/update-a`, { patch: { health: n % 4 } });
    const paintedAt = await painted;
    const done = await waitTask(task.task_id);
    await new Promise((resolve) => setTimeout(resolve, MARKER_PAUSE_MS));
    const committed = Date.parse(done.finishedAt!);
    latencies.push(paintedAt - committed);
    const arrived = await page.evaluate(
      ({ status, since }) => ((window as any).__markerArrivals as { status: number; at: number }[]).find((entry) => entry.status === status && entry.at >= since)?.at ?? null,
      { status: n % 4, since: posted },
    );
    if (arrived !== null) {
      delivery.push(arrived - committed);
      onPage.push(paintedAt - arrived);
    }
  }
  const sent = await generator.stop();
  const stoppedAt = Date.now();
  const eventsDuring = events - eventsBefore;
  const frames = await page.evaluate(() => {
    const w = window as any;
    w.__framing = false;
    return { frames: w.__frames.slice(1) as number[], longTasks: w.__frameLongTasks as number[] };
  });
  // The load's last task tells how far behind the server ran.
  const lastTask = sent.lastTask ? await waitTask(sent.lastTask) : null;
  record('node status under load: leaf status changes accepted per second (Update C)', round((sent.accepted * LOAD_BATCH) / sent.seconds));
  record('node status under load: Update C requests sent, accepted, failed', [sent.batches, sent.accepted, sent.failed]);
  record('node status under load: status events received by the page per second', round(eventsDuring / sent.seconds));
  record('node status under load: seconds the server ran behind when the load stopped (≤ 0: it had caught up)', lastTask ? round((Date.parse(lastTask.finishedAt!) - stoppedAt) / 1000) : null);
  record('node status under load: task end (commit) to painted row, p95 (ms)', round(percentile(latencies, 0.95)));
  record('node status under load: task end (commit) to painted row, median (ms)', round(median(latencies)));
  record('node status under load: task end to the event reaching the page (server), p95 / median (ms)', delivery.length ? [round(percentile(delivery, 0.95)), round(median(delivery))] : null);
  record('node status under load: event reaching the page to painted row (client), p95 / median (ms)', onPage.length ? [round(percentile(onPage, 0.95)), round(median(onPage))] : null);
  record('node status under load: frame time p95 (ms)', round(percentile(frames.frames, 0.95)));
  record('node status under load: frame time max (ms)', round(Math.max(...frames.frames)));
  record('node status under load: frames over 50 ms', frames.frames.filter((frame) => frame > 50).length);
  record('node status under load: long tasks, longest (ms)', round(Math.max(0, ...frames.longTasks)));
  await context.close();
});

test('Lighthouse, mobile', async () => {
  const { default: lighthouse } = await import('lighthouse');
  const port = 9300 + Math.floor(Math.random() * 500);
  const chrome = await chromium.launch({
    executablePath: process.env.CHROME_PATH ?? '/usr/bin/chromium',
    args: [...CHROMIUM_ARGS, `--remote-debugging-port=${port}`],
  });
  try {
    const run = async (path: string) => {
      const result = await lighthouse(`${server.url}${path}`, {
        port,
        output: 'json',
        logLevel: 'error',
        onlyCategories: ['performance', 'accessibility'],
        extraHeaders: { Cookie: cookie },
      });
      const categories = result?.lhr.categories;
      return { performance: categories?.performance?.score ?? null, accessibility: categories?.accessibility?.score ?? null };
    };
    record('Lighthouse mobile, reader (/read)', await run('/read?show=all'));
    record('Lighthouse mobile, login page', await run('/login'));
  } finally {
    await chrome.close();
  }
});
