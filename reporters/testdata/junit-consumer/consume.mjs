// Reads a JUnit XML file with junit2json (a third-party JUnit parser from the npm registry) and
// prints what a CI consumer would see, as JSON, for reporters' consumer test to compare.
// Usage: node consume.mjs FILE
import { readFile } from 'node:fs/promises';
import { parse } from 'junit2json';

const file = process.argv[2];
if (!file) {
  console.error('usage: node consume.mjs FILE');
  process.exit(2);
}
const parsed = await parse(await readFile(file, 'utf8'));
if (!parsed || !Array.isArray(parsed.testsuite)) {
  console.error(`${file}: no <testsuite> found`);
  process.exit(1);
}
const props = (list) => Object.fromEntries((list ?? []).map((p) => [p.name, p.value]));
const out = {
  name: parsed.name,
  tests: parsed.tests,
  failures: parsed.failures,
  errors: parsed.errors,
  suites: parsed.testsuite.map((s) => ({
    name: s.name,
    tests: s.tests,
    failures: s.failures,
    errors: s.errors,
    skipped: s.skipped,
    time: s.time,
    properties: props(s.properties),
    cases: (s.testcase ?? []).map((c) => {
      const first = (c.failure ?? c.error ?? c.skipped ?? [])[0] ?? {};
      return {
        name: c.name,
        classname: c.classname,
        time: c.time,
        status: c.failure ? 'failed' : c.error ? 'error' : c.skipped ? 'skipped' : 'passed',
        message: first.message ?? '',
        type: first.type ?? '',
        body: first.inner ?? '',
        systemOut: (c['system-out'] ?? []).join('\n'),
        properties: props(c.properties),
      };
    }),
  })),
};
process.stdout.write(JSON.stringify(out));
