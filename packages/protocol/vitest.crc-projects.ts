// The two runs of every test of a package that writes CRCs (@klog/protocol, @klog/kafka-protocol):
// with klog's CRC addon (where `pnpm install` built it; Kafka message sets get their CRCs in
// one call) and with the JavaScript CRCs it falls back to (src/crc32.ts), so both paths give the
// same bytes. Used as `test.projects` in their vitest.config.ts.
export const crcProjects = [
  { extends: true, test: { name: 'crc-addon' } },
  { extends: true, test: { name: 'crc-js', env: { KLOG_DISABLE_NATIVE_CRC: '1' } } },
];
