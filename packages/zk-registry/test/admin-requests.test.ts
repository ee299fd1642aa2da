import { describe, expect, it } from 'vitest';
import {
  AdminRequestRegistry,
  ControllerRegistry,
  deleteTopicPath,
  newTopicId,
  PreferredLeaderElectionInProgressError,
  preferredLeaderElectionPath,
  removeTopicOps,
  ReplicatedTopicRegistry,
  type PreferredLeaderElectionNode,
} from '../src/index.js';
import { connectClient, freshChroot, waitFor } from './helpers.js';

describe('admin requests (docs/replication.md §3, §5.3, §15.1)', () => {
  it('a topic deletion is asked for, watched, and removed by the controller with the definition, fenced', async () => {
    const connectString = freshChroot();
    const adminZk = await connectClient(connectString);
    const controllerZk = await connectClient(connectString);
    const admin = new AdminRequestRegistry(adminZk);
    const requests = new AdminRequestRegistry(controllerZk);
    const controller = new ControllerRegistry(controllerZk);
    const lease = (await controller.elect(0))!;
    await new ReplicatedTopicRegistry(adminZk).createTopic('events', { id: newTopicId(), partitions: [[0]], createdMs: 1 });

    const seen: string[][] = [];
    const watch = requests.watchTopicDeletions((topics) => void seen.push(topics));
    await watch.ready;
    expect(seen).toEqual([[]]);
    expect(await admin.requestTopicDeletion('events')).toBe(true);
    expect(await admin.requestTopicDeletion('events')).toBe(false); // already asked
    expect(await admin.isTopicDeletionPending('events')).toBe(true);
    await waitFor(() => seen.at(-1)?.[0] === 'events', 5000, 'deletion request seen');
    expect(await requests.listTopicDeletions()).toEqual(['events']);

    // The definition (no partitions node here) and the request node last, in one fenced multi.
    await controller.commitFenced(lease, [...removeTopicOps('events', { hasPartitionsNode: false }), requests.removeTopicDeletionOp('events')]);
    expect(await adminZk.exists(deleteTopicPath('events'))).toBeUndefined();
    expect(await new ReplicatedTopicRegistry(adminZk).readDefinition('events')).toBeUndefined();
    await waitFor(() => seen.at(-1)?.length === 0, 5000, 'removal seen');
    watch.close();
  });

  it('one preferred-leader election at a time, read with its version, removed at that version', async () => {
    const connectString = freshChroot();
    const adminZk = await connectClient(connectString);
    const controllerZk = await connectClient(connectString);
    const admin = new AdminRequestRegistry(adminZk);
    const requests = new AdminRequestRegistry(controllerZk);
    const seen: Array<PreferredLeaderElectionNode | undefined> = [];
    const watch = requests.watchPreferredLeaderElection((node) => void seen.push(node));
    await watch.ready;
    expect(seen).toEqual([undefined]);

    await admin.requestPreferredLeaderElection({ all: false, partitions: [{ topic: 'events', partition: 1 }] });
    await expect(admin.requestPreferredLeaderElection({ all: true })).rejects.toBeInstanceOf(PreferredLeaderElectionInProgressError);
    await waitFor(() => seen.at(-1) !== undefined, 5000, 'request seen');
    expect(seen.at(-1)).toEqual({ request: { all: false, partitions: [{ topic: 'events', partition: 1 }] }, version: 0 });
    expect(await requests.readPreferredLeaderElection()).toEqual(seen.at(-1));

    const controller = new ControllerRegistry(controllerZk);
    const lease = (await controller.elect(0))!;
    await controller.commitFenced(lease, [requests.removePreferredLeaderElectionOp(0)]);
    await waitFor(() => seen.at(-1) === undefined, 5000, 'removal seen');
    await admin.requestPreferredLeaderElection({ all: true });
    await waitFor(() => seen.at(-1)?.request?.all === true, 5000, 'second request seen');

    // A value that does not parse is delivered as invalid, for the controller to remove.
    await controllerZk.setData(preferredLeaderElectionPath(), '{"version":1}');
    await waitFor(() => seen.at(-1)?.invalid !== undefined, 5000, 'invalid request seen');
    expect(seen.at(-1)).toMatchObject({ request: undefined, version: 1 });
    watch.close();
  });
});
