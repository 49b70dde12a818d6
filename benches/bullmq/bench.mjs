// BullMQ baseline for `cargo bench --bench job_throughput`.
// The same workload as Trellis's side: N no-op jobs added in bulk batches of
// 1000, one worker process with the given concurrency, measured from the
// first add until the last completion; then pickup latency (processing
// start − enqueue) at half of that peak rate. Prints one JSON line.
import { Queue, Worker } from 'bullmq';

const url = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const connection = { host: url.hostname, port: Number(url.port || 6379) };
const jobs = Number(process.env.JOBS ?? 20000);
const concurrency = Number(process.env.CONCURRENCY ?? 64);
const latencySeconds = Number(process.env.LATENCY_SECONDS ?? 5);
const prefix = `bullmq-bench-${process.pid}-${Date.now()}`;

const queue = new Queue('noop', { connection, prefix });
let completed = 0;
let target = jobs;
let onTarget = () => {};
const pickups = [];
let recordPickups = false;
const worker = new Worker(
  'noop',
  async (job) => {
    if (recordPickups) pickups.push(Date.now() - job.timestamp);
  },
  { connection, prefix, concurrency },
);
worker.on('completed', () => {
  completed += 1;
  if (completed === target) onTarget();
});
await worker.waitUntilReady();

function batch(n, offset) {
  return Array.from({ length: n }, (_, i) => ({ name: 'noop', data: { i: offset + i } }));
}

// Throughput.
let finished = new Promise((resolve) => (onTarget = resolve));
const started = performance.now();
for (let i = 0; i < jobs; i += 1000) {
  await queue.addBulk(batch(Math.min(1000, jobs - i), i));
}
await finished;
const seconds = (performance.now() - started) / 1000;
const jobsPerSecond = jobs / seconds;

// Pickup latency at half the peak rate, in 10 ms ticks.
const rate = jobsPerSecond / 2;
const ticks = Math.round((latencySeconds * 1000) / 10);
const perTick = Math.max(1, Math.round(rate / 100));
completed = 0;
target = ticks * perTick;
recordPickups = true;
finished = new Promise((resolve) => (onTarget = resolve));
const begin = performance.now();
for (let t = 0; t < ticks; t++) {
  await queue.addBulk(batch(perTick, t * perTick));
  const next = begin + (t + 1) * 10;
  const wait = next - performance.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
await finished;
pickups.sort((a, b) => a - b);
const pct = (p) => pickups[Math.min(pickups.length - 1, Math.floor((p / 100) * pickups.length))];

console.log(JSON.stringify({
  jobs_per_s: Math.round(jobsPerSecond),
  half_rate: Math.round(perTick * 100),
  p50_ms: pct(50),
  p99_ms: pct(99),
}));
await worker.close();
await queue.obliterate({ force: true });
await queue.close();
process.exit(0);
