import type { Command } from 'commander';
import { intArg } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { examples, jsonOption } from './options.js';

/** sandbox and demo: the local stand-in of the hiring service, alone or with a receiver. */
export function addSandboxCommands(program: Command, { io, outcome, done }: CommandContext): void {
  program
    .command('sandbox')
    .description('run the local stand-in of the hiring service (as `npm run sandbox`; see docs/sandbox.md)')
    .option('--port <port>', 'port (overrides SANDBOX_PORT; default 4010)', intArg(0, 65535))
    .option('--host <host>', 'address (overrides SANDBOX_HOST; default 127.0.0.1)')
    .addHelpText(
      'after',
      examples(['hiring-receiver sandbox', 'hiring-receiver sandbox --port 5000', 'SANDBOX_TIME_FACTOR=60 hiring-receiver sandbox   # retries 60 times sooner']) +
        '\nAlso SANDBOX_TIME_FACTOR (its clock runs this many times faster) and SANDBOX_MANUAL_CLOCK=1 (time moves only by POST /_sandbox/clock/advance): docs/sandbox.md.',
    )
    .action(async (o: { port?: number; host?: string }) => {
      if (o.port !== undefined) process.env['SANDBOX_PORT'] = String(o.port);
      if (o.host !== undefined) process.env['SANDBOX_HOST'] = o.host;
      outcome.running = true;
      await import('../../sandbox/main.js');
    });

  program
    .command('demo')
    .description('the sandbox and a receiver in one process, a scenario through every event type, and what arrived')
    .option('--timeout <seconds>', 'give up after this long', intArg(5, 600), 60)
    .option('--keep', 'keep the temporary database and sink file')
    .option('--verbose', "show the receiver's logs on stderr")
    .addOption(jsonOption())
    .addHelpText('after', examples(['npm run demo', 'hiring-receiver demo --keep']))
    .action((o) => done(import('../commands/demo.js').then((m) => m.runDemo(io, o))));
}
