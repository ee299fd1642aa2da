import { assertZooKeeperRunning } from '../src/testing.js';

/** Fails the whole run, with instructions, when no ZooKeeper answers. */
export default async function setup(): Promise<void> {
  await assertZooKeeperRunning();
}
