import type { Command } from 'commander';
import { intArg } from '../parseArgs.js';
import { SERVE_VIA_CLI } from '../serveViaCli.js';
import type { CommandContext } from './context.js';
import { examples } from './options.js';

/** serve and work: the receiver itself, run from the CLI (signals end them). */
export function addReceiverCommands(program: Command, { outcome }: CommandContext): void {
  program
    .command('serve')
    .description('run the receiver (what `npm start` runs): the same as src/main.ts, configured from the environment and CONFIG_FILE')
    .option('--port <port>', 'listen port (overrides PORT)', intArg(0, 65535))
    .option('--host <host>', 'listen address (overrides HOST)')
    .addHelpText('after', examples(['WEBHOOK_SECRET=whsec_... HIRING_API_URL=https://hiring.example.com HIRING_API_KEY=sk-... hiring-receiver serve', 'hiring-receiver serve --port 3000']))
    .action(async (o: { port?: number; host?: string }) => {
      if (o.port !== undefined) process.env['PORT'] = String(o.port);
      if (o.host !== undefined) process.env['HOST'] = o.host;
      outcome.running = true;
      (globalThis as Record<symbol, unknown>)[SERVE_VIA_CLI] = true;
      await import('../../main.js');
    });

  program
    .command('work')
    .description('run only the workers (result fetching and sinks) against the database, beside a `serve` started with WORKER_CONCURRENCY=0: ingest then keeps its event loop to itself under load')
    .addHelpText(
      'after',
      examples([
        'WORKER_CONCURRENCY=0 hiring-receiver serve &   # ingest only',
        'hiring-receiver work                            # same environment; one work process per database',
      ]),
    )
    .action(async () => {
      outcome.running = true;
      const { runReceiver } = await import('../../runReceiver.js');
      await runReceiver('work');
    });
}
