/**
 * `npm run x` runs node under npm (and a shell); `kill <npm's pid>` ends those and leaves node
 * running, re-parented, still holding its port (the next start meets EADDRINUSE). Under an npm
 * script only (npm sets npm_lifecycle_event), losing that parent means npm is gone: `onGone` is
 * called once. Started any other way (`nohup node ... &` from a script that then exits, a
 * supervisor), a new parent is normal and nothing happens. The check runs every second and
 * does not keep the process alive.
 */
export function onNpmParentGone(env: NodeJS.ProcessEnv, onGone: () => void): void {
  if (!env['npm_lifecycle_event']) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, 1000);
  timer.unref();
}
