import { type Command, Option } from 'commander';
import { collect } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { examples, jsonOption } from './options.js';

/** webhooks register, list, rotate-secret, deliveries and delete: this receiver's registration with the hiring service. */
export function addWebhooksCommand(program: Command, { io, done }: CommandContext): void {
  const wh = program
    .command('webhooks')
    .description("manage this receiver's registration with the hiring service (/api/v2/webhooks), with HIRING_API_URL and HIRING_API_KEY")
    .addHelpText('after', '\nCredentials: HIRING_API_URL and HIRING_API_KEY, or --source NAME to use a source of CONFIG_FILE.');
  const src = () => new Option('--source <name>', 'use the api_url/api_key of this CONFIG_FILE source');
  wh.command('register')
    .description('register a URL; prints the new signing secret once, with how to configure it')
    .requiredOption('--url <url>', 'public URL of this receiver, ending in /webhooks')
    .option('--events <types...>', 'only these event types (default: all)', collect)
    .option('--disabled', 'register paused (enabled: false)')
    .option('--description <text>', 'a note shown in the portal')
    .option('--idempotency-key <key>', 'Idempotency-Key of the create (default: a new one per run; reuse one to replay safely)')
    .option('--any-path', 'accept a URL not ending in /webhooks (a proxy in front of the receiver maps it there)')
    .addOption(src())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver webhooks register --url https://receiver.example.com/webhooks', 'hiring-receiver webhooks register --url https://receiver.example.com/webhooks --events interview.completed insights.completed']))
    .action((o) => done(import('../commands/webhooks.js').then((m) => m.runRegister(io, o))));
  wh.command('list')
    .description('every registered webhook (all pages), secrets masked')
    .addOption(src())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver webhooks list --json']))
    .action((o) => done(import('../commands/webhooks.js').then((m) => m.runList(io, o))));
  wh.command('rotate-secret')
    .description('new signing secret, printed once, with how to roll it out')
    .argument('<id>', 'webhook id')
    .addOption(src())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver webhooks rotate-secret 0b7c...']))
    .action((id: string, o) => done(import('../commands/webhooks.js').then((m) => m.runRotate(io, id, o))));
  wh.command('deliveries')
    .description('delivery attempts of a webhook, newest first (all pages)')
    .argument('<id>', 'webhook id')
    .addOption(new Option('--status <status>', 'only attempts that succeeded or failed').choices(['succeeded', 'failed']))
    .option('--event <id>', 'attempts of one event')
    .addOption(src())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver webhooks deliveries 0b7c... --status failed']))
    .action((id: string, o) => done(import('../commands/webhooks.js').then((m) => m.runDeliveries(io, id, o))));
  wh.command('delete')
    .description('remove a webhook; the service stops sending to it')
    .argument('<id>', 'webhook id')
    .addOption(src())
    .addOption(jsonOption())
    .addHelpText('after', examples(['hiring-receiver webhooks delete 0b7c...']))
    .action((id: string, o) => done(import('../commands/webhooks.js').then((m) => m.runDelete(io, id, o))));
}
