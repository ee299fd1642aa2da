/**
 * A consumer group's owner and offset nodes of replicated partitions, `<partition>` beside the
 * paper's `<brokerId>-<partition>` (docs/replication.md §14): each kind reads only its own.
 */
import { describe, expect, it } from 'vitest';
import { AuditRangeRegistry, groupPartitionName, OffsetRegistry, OwnershipRegistry, replicatedAuditRangePath, replicatedOffsetPath, replicatedOwnerPath } from '../src/index.js';
import { connectClient, freshChroot } from './helpers.js';

describe('replicated partitions of a group', () => {
  it('commits, reads and lists offsets of both kinds apart', async () => {
    const zk = await connectClient(freshChroot());
    const offsets = new OffsetRegistry(zk);
    await offsets.commit('g', 'events', { replicated: true, partition: 3 }, 1024);
    await offsets.commit('g', 'events', { brokerId: 1, partition: 3 }, 15);
    expect((await zk.getData(replicatedOffsetPath('g', 'events', 3)))?.data.toString()).toBe('1024');
    expect(await offsets.read('g', 'events', { replicated: true, partition: 3 })).toBe(1024);
    expect(await offsets.read('g', 'events', { brokerId: 1, partition: 3 })).toBe(15);
    expect(await offsets.listReplicated('g', 'events')).toEqual([{ partition: 3, offset: 1024 }]);
    expect(await offsets.list('g', 'events')).toEqual([{ brokerId: 1, partition: 3, offset: 15 }]);
    await expect(offsets.commit('g', 'events', { replicated: true, partition: 3 }, -1)).rejects.toThrow('invalid offset -1 for events 3');
  });

  it('claims, lists and releases owners of both kinds apart, fenced commits included', async () => {
    const zk = await connectClient(freshChroot());
    const owners = new OwnershipRegistry(zk);
    const fence = await owners.claimFenced('g', 'events', { replicated: true, partition: 0 }, 'c1-0');
    expect(fence?.path).toBe(replicatedOwnerPath('g', 'events', 0));
    expect(await owners.claim('g', 'events', { brokerId: 2, partition: 0 }, 'c1-1')).toBe(true);
    expect(await owners.listReplicatedOwners('g', 'events')).toEqual([{ partition: 0, owner: 'c1-0' }]);
    expect(await owners.listOwners('g', 'events')).toEqual([{ brokerId: 2, partition: 0, owner: 'c1-1' }]);
    await new OffsetRegistry(zk).commit('g', 'events', { replicated: true, partition: 0 }, 7, fence);
    expect(await owners.release('g', 'events', { replicated: true, partition: 0 })).toBe(true);
    expect(await owners.listReplicatedOwners('g', 'events')).toEqual([]);
  });

  it('keeps the audit ranges of both kinds apart, and names each kind as the group does', async () => {
    const zk = await connectClient(freshChroot());
    const ranges = new AuditRangeRegistry(zk);
    await ranges.setRange('g', 'events', { replicated: true, partition: 3 }, { from: 0, to: 40 });
    await ranges.setRange('g', 'events', { brokerId: 1, partition: 3 }, { from: 10, to: 20 });
    expect((await zk.getData(replicatedAuditRangePath('g', 'events', 3)))?.data.toString()).toBe('{"from":0,"to":40}');
    expect(await ranges.range('g', 'events', { replicated: true, partition: 3 })).toEqual({ from: 0, to: 40 });
    expect(await ranges.range('g', 'events', { brokerId: 1, partition: 3 })).toEqual({ from: 10, to: 20 });
    expect(await zk.getChildren('/consumers/g/audit/ranges/events')).toEqual(['1-3', '3']);
    expect([groupPartitionName({ replicated: true, partition: 3 }), groupPartitionName({ brokerId: 1, partition: 3 })]).toEqual(['3', '1-3']);
  });
});
