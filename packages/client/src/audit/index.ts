export * from './audit-counter.js';
export * from './event.js';
