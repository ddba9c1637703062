// The cluster benchmark's spawner: a small node process, forked before the benchmark holds any
// cluster, that starts the timed processes (the daemon, the request-only reference) when the
// benchmark asks over IPC. Spawning from the benchmark itself would time its own fork: node's
// spawn() returns once the child has exec'd, and forking a process copies its page tables, which
// in UML grows with its size (spawn() of `node -e` from a 41 MiB process 18–35 ms, from 675 MiB
// 89–99 ms, from 1.2 GiB 120–310 ms, same boot); at 10,000 the benchmark holds hundreds of MiB
// of fake API server objects, a DaemonSet's container runtime nothing like it.
// Request: { id, file, args, env, log (file the child's stdout and stderr are appended to, or
// null), cgroup (the group to start it in, or null), root (the group this process goes back to) }.
// Replies: { id, pid, at (process.hrtime.bigint() before spawn(), a string), spawnMs } or
// { id, error }; later { id, exit: { code, signal } }.
import { spawn } from 'node:child_process';
import { closeSync, openSync, writeFileSync } from 'node:fs';

process.on('message', ({ id, file, args, env, log, cgroup, root }) => {
  const fd = log ? openSync(log, 'a') : 'ignore';
  // A child starts in its parent's cgroup: this process steps into the group for the spawn and back out.
  if (cgroup) writeFileSync(`${cgroup}/cgroup.procs`, String(process.pid));
  const at = process.hrtime.bigint();
  let child;
  try {
    child = spawn(file, args, { stdio: ['ignore', fd, fd], env });
  } catch (e) {
    process.send({ id, error: e.message });
    return;
  } finally {
    if (cgroup) writeFileSync(`${root}/cgroup.procs`, String(process.pid));
    if (log) closeSync(fd);
  }
  const spawnMs = Number(process.hrtime.bigint() - at) / 1e6;
  if (child.pid === undefined) return void child.once('error', (e) => process.send({ id, error: e.message }));
  process.send({ id, pid: child.pid, at: String(at), spawnMs });
  child.once('exit', (code, signal) => process.send({ id, exit: { code, signal } }));
});
process.on('disconnect', () => process.exit());
