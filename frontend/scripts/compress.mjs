// Precompresses the built assets (gzip and brotli, best levels) so the
// server sends them as they are instead of compressing on every request.
// Only text formats, and only when the compressed file is smaller.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const dir = new URL('../dist/assets/', import.meta.url).pathname;
const TEXT = /\.(js|mjs|css|svg|json|html|txt|map|webmanifest)$/;

let count = 0;
for (const name of await readdir(dir)) {
  if (!TEXT.test(name)) continue;
  const path = join(dir, name);
  const body = await readFile(path);
  const gz = gzipSync(body, { level: 9 });
  const br = brotliCompressSync(body, {
    params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: body.length },
  });
  if (gz.length < body.length) await writeFile(`${path}.gz`, gz);
  if (br.length < body.length) await writeFile(`${path}.br`, br);
  count += 1;
}
console.log(`precompressed ${count} assets`);
