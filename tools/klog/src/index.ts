/** @klog/cli: the `klog` command-line tool (SPEC §6). The binary is dist/main.js; this module lets tests and scripts build the program. */
export { buildProgram, runCli } from './cli.js';
