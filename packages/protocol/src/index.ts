/**
 * @klog/protocol: klog's bytes. Messages and message sets (SPEC §1) with their metadata headers
 * and gzip compression, request and response codecs (SPEC §3), error codes. No I/O.
 * docs/format.md documents every layout.
 */
export * from './buffer-view.js';
export * from './codec.js';
export * from './compression.js';
export * from './crc32.js';
export * from './errors.js';
export * from './frame.js';
export * from './message.js';
export * from './message-header.js';
export * from './message-set.js';
export * from './message-set-iterator.js';
export * from './requests/index.js';
