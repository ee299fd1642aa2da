// ESLint for the whole workspace (flat config). Each package's `lint` script runs `eslint src test`
// from its own directory after its tsc check; file patterns here are relative to the repository root.
// TypeScript files are linted with type information (typescript-eslint's recommended type-checked
// rules: floating and misused promises, the no-unsafe-* family) from the package's tsconfig.lint.json.
import js from '@eslint/js';
import stylistic from '@stylistic/eslint-plugin';
import tseslint from 'typescript-eslint';

/** Workspace directories, each with the tsconfig that covers its src and test files. */
const projects = [
  ['packages/protocol', 'tsconfig.lint.json'],
  ['packages/kafka-protocol', 'tsconfig.lint.json'],
  ['packages/retry', 'tsconfig.lint.json'],
  ['packages/storage', 'tsconfig.lint.json'],
  ['packages/logger', 'tsconfig.lint.json'],
  ['packages/zk-registry', 'tsconfig.lint.json'],
  ['packages/client', 'tsconfig.lint.json'],
  ['apps/broker', 'tsconfig.lint.json'],
  ['apps/mirror-maker', 'tsconfig.lint.json'],
  ['apps/audit', 'tsconfig.lint.json'],
  ['tools/klog', 'tsconfig.lint.json'],
  ['tests/cluster', 'tsconfig.json'],
  ['tests/kafka', 'tsconfig.json'],
  ['tests/bench', 'tsconfig.json'],
];

/** The widest line allowed, in characters (comments included; string literals exempt). */
const MAX_LINE = 160;

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/build/**', '**/vitest.config.ts', '**/vitest.crc-projects.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked.map((config) => ({ ...config, files: ['**/*.ts'] })),
  ...projects.map(([dir, tsconfig]) => ({
    files: [`${dir}/src/**/*.ts`, `${dir}/test/**/*.ts`],
    languageOptions: {
      parserOptions: { project: `${dir}/${tsconfig}`, tsconfigRootDir: import.meta.dirname },
    },
  })),
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unsafe-assignment': 'error',
      '@typescript-eslint/no-unsafe-member-access': 'error',
      '@typescript-eslint/no-unsafe-call': 'error',
      '@typescript-eslint/no-unsafe-return': 'error',
      '@typescript-eslint/no-unsafe-argument': 'error',
      // Rethrowing or rejecting with what a catch received (typed unknown) passes the failure on as is.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
      // An async function without await is how a function turns its throws into a rejected promise.
      '@typescript-eslint/require-await': 'off',
      // Parameters and bindings named with a leading underscore are unused on purpose.
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Tests match a terminal's output exactly: escape sequences and runs of spaces are the point.
    files: ['**/test/**/*.ts'],
    rules: { 'no-control-regex': 'off', 'no-regex-spaces': 'off' },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' },
    },
  },
  {
    plugins: { '@stylistic': stylistic },
    rules: {
      '@stylistic/max-len': ['error', {
        code: MAX_LINE,
        ignoreUrls: true,
        ignoreStrings: true,
        ignoreTemplateLiterals: true,
        ignoreRegExpLiterals: true,
      }],
    },
  },
);
