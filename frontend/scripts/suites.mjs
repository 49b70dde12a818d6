// The frontend's test suites, one after another: unit and component tests
// (Vitest + happy-dom), the bundle budget (size-limit) and the browser
// tests (playwright-core + Debian's Chromium against the real server).
// Prints each suite's counts and a last line `N passed, N failed`.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const out = join(root, 'test-results');
mkdirSync(out, { recursive: true });
const only = process.argv.slice(2);

function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  return result.status ?? 1;
}

function vitestSuite(name, config) {
  const report = join(out, `${name}.json`);
  rmSync(report, { force: true });
  const args = ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`];
  if (config) args.push('--config', config);
  const status = run('npx', args);
  try {
    const json = JSON.parse(readFileSync(report, 'utf8'));
    const failed = json.numFailedTests + (json.numFailedTestSuites > 0 && json.numFailedTests === 0 ? json.numFailedTestSuites : 0);
    return { name, passed: json.numPassedTests, failed: failed || (status === 0 ? 0 : 1) };
  } catch {
    return { name, passed: 0, failed: 1 };
  }
}

function sizeSuite() {
  const result = spawnSync('npx', ['size-limit', '--json'], { cwd: root, encoding: 'utf8' });
  try {
    const checks = JSON.parse(result.stdout);
    for (const check of checks) {
      console.log(`size-limit: ${check.name}: ${(check.size / 1000).toFixed(1)} kB ${check.passed ? '≤' : '>'} limit`);
    }
    const passed = checks.filter((check) => check.passed).length;
    return { name: 'bundle budget', passed, failed: checks.length - passed };
  } catch {
    process.stderr.write(result.stdout + result.stderr);
    return { name: 'bundle budget', passed: 0, failed: 1 };
  }
}

const suites = [];
if (!only.length || only.includes('unit')) suites.push(vitestSuite('unit'));
if (!only.length || only.includes('size')) suites.push(sizeSuite());
if (!only.length || only.includes('e2e')) suites.push(vitestSuite('e2e', 'vitest.e2e.config.ts'));

let passed = 0;
let failed = 0;
for (const suite of suites) {
  console.log(`frontend ${suite.name}: ${suite.passed} passed, ${suite.failed} failed`);
  passed += suite.passed;
  failed += suite.failed;
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
