// The bundle budget: what the app's page loads before it can show the
// reader (the entry and every chunk it imports statically), gzipped; and
// its stylesheet. Read from Vite's manifest, so a new shared chunk counts.
import { readFileSync } from 'node:fs';

const manifest = JSON.parse(readFileSync(new URL('./dist/.vite/manifest.json', import.meta.url), 'utf8'));

function closure(key, seen = new Set()) {
  if (seen.has(key)) return seen;
  seen.add(key);
  for (const next of manifest[key]?.imports ?? []) closure(next, seen);
  return seen;
}

// The reader is a chunk of its own (asked for at start, evaluated in its own
// task) but counts here: the page loads it before it shows the reader.
const reader = Object.keys(manifest).find((key) => manifest[key].name === 'Reader' && manifest[key].isDynamicEntry);
if (!reader) throw new Error('no Reader chunk in the manifest');
const loaded = [...closure(reader, closure('index.html'))].map((key) => manifest[key]);
const js = loaded.map((chunk) => `dist/${chunk.file}`).filter((file) => file.endsWith('.js'));
const css = [...new Set(loaded.flatMap((chunk) => chunk.css ?? []))].map((file) => `dist/${file}`);

export default [
  { name: 'entry + reader JS (gzip)', path: js, limit: '70 kB', gzip: true },
  { name: 'app CSS (gzip)', path: css, limit: '15 kB', gzip: true },
];
