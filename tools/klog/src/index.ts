/** @klog/cli: the `klog` command-line tool (docs/design.md §6). The binary is dist/main.js; this module lets tests and scripts build the program. */
export { buildProgram, runCli } from './cli.js';
