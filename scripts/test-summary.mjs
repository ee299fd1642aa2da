#!/usr/bin/env node
// Adds up the vitest JSON reports of every package (test-results.json, written by each
// package's `test` script) and prints "tests: N passed, N failed". Exits 1 when any failed
// or no report was found.
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
    passed += r.numPassedTests;
    failed += r.numFailedTests + (r.numRuntimeErrorTestSuites ?? 0);
    reports++;
    console.log(`${join(group, name)}: ${r.numPassedTests} passed, ${r.numFailedTests} failed`);
  }
}
console.log(`tests: ${passed} passed, ${failed} failed`);
process.exit(failed > 0 || reports === 0 ? 1 : 0);
