#!/usr/bin/env node
/** Entry point of the `klog` binary. */
import { runCli } from './cli.js';

await runCli(process.argv);
