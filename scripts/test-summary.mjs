#!/usr/bin/env node
// Adds up the vitest JSON reports of every package (test-results.json, written by each
// package's `test` script) and prints "tests: N passed, N failed". Exits 1 when any failed
// or no report was found. Argument: the exit status of the test run.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

let passed = 0;
let failed = 0;
let reports = 0;
for (const group of ['packages', 'apps', 'tools', 'tests']) {
  if (!existsSync(group)) continue;
  for (const name of readdirSync(group)) {
    const file = join(group, name, 'test-results.json');
    if (!existsSync(file)) continue;
    const r = JSON.parse(readFileSync(file, 'utf8'));
    // A suite with an unhandled error or a file that failed to run counts as one more failure.
    const broken = (r.numRuntimeErrorTestSuites ?? 0) + (r.success === false && r.numFailedTests === 0 ? 1 : 0);
    passed += r.numPassedTests;
    failed += r.numFailedTests + broken;
    reports++;
    console.log(`${join(group, name)}: ${r.numPassedTests} passed, ${r.numFailedTests + broken} failed${broken ? ' (errors outside tests)' : ''}`);
  }
}
// A test run that failed without a failed test (an unhandled error, a crashed worker) is a failure too.
const runStatus = Number(process.argv[2] ?? 0);
if (runStatus !== 0 && failed === 0) {
  console.log('a test run ended with errors outside the tests (see its output above)');
  failed = 1;
}
console.log(`tests: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 || reports === 0 ? 1 : 0);
