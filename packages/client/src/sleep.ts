/** The abortable wait of @klog/retry, where the client's modules import it from. */
export { sleep } from '@klog/retry';
