import type { Command } from 'commander';
import type { CommandContext } from './context.js';
import { databaseOption, examples, interruptHelp, jsonOption, progressHelp, progressOption } from './options.js';

/** sinks list, enable and send-now. */
export function addSinksCommand(program: Command, { io, done }: CommandContext): void {
  const sk = program.command('sinks').description('where settled events are fanned out (CONFIG_FILE "sinks")');
  sk.command('list')
    .description('each sink: enabled or disabled, pending, failing, delivered, dead')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .addHelpText('after', examples(['CONFIG_FILE=./receiver.json hiring-receiver sinks list']))
    .action((o) => done(import('../commands/sinks.js').then((m) => m.runSinksList(io, o))));
  sk.command('enable')
    .description('re-enable a sink a 410 Gone disabled; its waiting deliveries go out')
    .argument('<name>')
    .addOption(databaseOption())
    .addHelpText('after', examples(['hiring-receiver sinks enable crm']))
    .action((name: string, o) => done(import('../commands/sinks.js').then((m) => m.runSinksEnable(io, name, o))));
  sk.command('send-now')
    .description("the sink's consumer is back: its deliveries waiting for a later attempt (a backoff of up to 1 h, a Retry-After) go out now, each keeping its attempts; a sink a 410 disabled is enabled")
    .argument('<name>')
    .addOption(databaseOption())
    .option('--dry-run', 'count what would be sent now; change nothing')
    .addOption(jsonOption())
    .addOption(progressOption())
    .addHelpText(
      'after',
      examples(['hiring-receiver sinks send-now crm --dry-run', 'hiring-receiver sinks send-now crm']) +
        "\nWorks next to a running receiver, whose sink worker sends them at its next poll. Dead letters are not touched: `dead-letters retry --kind sink:<name>`." +
        progressHelp('sinks send-now: 12,000 deliveries made due so far') +
        interruptHelp('it made due'),
    )
    .action((name: string, o) => done(import('../commands/sinks.js').then((m) => m.runSinksSendNow(io, name, o))));
}
