#!/usr/bin/env -S node --initial-old-space-size=64
// The `klog` command: runs the built program in dist/ (made by `npm run setup`). This file is
// committed so that package managers can link the command before the first build.
import('../dist/main.js').catch((err) => {
  if (err?.code === 'ERR_MODULE_NOT_FOUND' && String(err.message).includes('dist/main.js')) {
    process.stderr.write('klog: not built yet: run `npm run setup` in the klog checkout\n');
    process.exit(1);
  }
  throw err;
});
