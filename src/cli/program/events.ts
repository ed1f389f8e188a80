import { type Command, Option } from 'commander';
import { FIXTURE_TYPES } from '../fixtures.js';
import { UsageError } from '../errors.js';
import { afterArg, collect, collectWhole, intArg, timeArg } from '../parseArgs.js';
import type { CommandContext } from './context.js';
import { databaseOption, examples, jsonOption } from './options.js';

/** send, replay and status: events sent to a receiver, stored events queued again, what is stored. */
export function addEventCommands(program: Command, ctx: CommandContext): void {
  addSendCommand(program, ctx);
  addReplayCommand(program, ctx);
  addStatusCommand(program, ctx);
}

/** send: a signed event, as the service sends it, to a receiver. */
function addSendCommand(program: Command, { io, done }: CommandContext): void {
  program
    .command('send')
    .description('sign an event like the service does (Standard Webhooks) and POST it to a receiver')
    .argument('[event-type]', `built-in fixture: ${FIXTURE_TYPES.join(', ')}`)
    .option('--url <url>', 'receiver URL (default: http://127.0.0.1:$PORT/webhooks, PORT default 8080)')
    .option('--secret <whsec>', 'signing secret (default: the last of WEBHOOK_SECRET; a value here is readable in ps by every user of the machine)')
    .option('--file <path>', 'send this JSON envelope instead of a fixture')
    .option('--id <event-id>', 'envelope id (dedupe key); default a new UUID')
    .option('--application <id>', 'application id (payload.application.id)')
    .option('--external-id <id>', 'your correlation id on the application block ("null" for none)')
    .option('--type <event-type>', 'override event_type (e.g. an unknown type, which the receiver must accept)')
    .option('--set <path=value>', 'set any field, JSON value or string, repeatable (payload.interview.result.is_eligible=false)', collectWhole)
    .option('--timestamp-offset <seconds>', 'shift webhook-timestamp (e.g. -400 is outside the 5-minute tolerance)', intArg(-1_000_000_000, 1_000_000_000), 0)
    .option('--repeat <n>', 'send the same event (same id and body) n times, each with a fresh webhook-id', intArg(1, 1000), 1)
    .option('--timeout <ms>', 'per-request timeout', intArg(1, 600_000), 10_000)
    .option('--print', 'print the exact request (method, URL, headers, body) before sending')
    .addHelpText(
      'after',
      examples([
        'WEBHOOK_SECRET=whsec_... hiring-receiver send application.created',
        'hiring-receiver send interview.completed --url http://127.0.0.1:8080/webhooks --set payload.interview.result.is_eligible=false',
        'hiring-receiver send insights.completed --repeat 3          # duplicate delivery: same event id',
        'hiring-receiver send application.created --timestamp-offset -400   # rejected: outside tolerance',
        'hiring-receiver send --file event.json --print',
      ]) + '\nExit code 0 when every answer is 2xx, else 1 (the answer is printed on stderr).',
    )
    .action((eventType: string | undefined, o) => done(import('../commands/send.js').then((m) => m.runSend(io, eventType, o))));
}

/** replay: stored events queued again, through processing and/or to sinks. */
function addReplayCommand(program: Command, { io, done }: CommandContext): void {
  program
    .command('replay')
    .description('queue stored events again: through processing (default) and/or to sinks (same webhook-id as before)')
    .addOption(databaseOption())
    .option('--id <ids...>', 'event ids (repeatable, or comma-separated)', collect)
    .option('--type <types...>', 'event types; `prefix.*` matches a family (interview.*)', collect)
    .option('--since <time>', 'received at or after: ISO 8601 or an age (30m, 2h, 7d)', timeArg)
    .option('--until <time>', 'received before: ISO 8601 or an age', timeArg)
    .option('--application <id>', 'events of one application (its id, or your external_id)')
    .option('--source <name>', 'events of one configured source')
    .option('--after <received_at/id>', 'only events after this one in the replay\'s order (received_at, then id): continues a stopped replay, as its line on stderr says', afterArg)
    .option('--sink <names...>', 'deliver again to these sinks (`all`: every configured sink that wants the event)', collect)
    .option('--missing', 'with --sink: only settled events the sink takes and has no delivery record of (added later, or not configured when they settled)')
    .option('--processing', 'also re-run processing when --sink is given (the default without --sink)')
    .option('--all', 'every stored event (required when no filter is given)')
    .option('--limit <n>', 'at most n events, oldest first', intArg(1))
    .option('--dry-run', 'list what would be queued; change nothing')
    .option('--wait', 'wait until the queued work finished (needs a running receiver with workers)')
    .option('--timeout <seconds>', 'bound of --wait', intArg(1, 86_400), 300)
    .addOption(jsonOption())
    .addOption(new Option('--progress', 'progress lines on stderr where no bar is shown (not a terminal, a dry run): one every 2 s at most'))
    .addHelpText(
      'after',
      examples([
        'hiring-receiver replay --type interview.completed --since 2h --dry-run',
        'hiring-receiver replay --application ats-cand-20931',
        'hiring-receiver replay --id 7d0c... --sink crm --wait',
        'hiring-receiver replay --all --sink all --since 2026-11-20',
        'hiring-receiver replay --sink crm --missing --dry-run',
      ]) +
        '\nWorks on the database directly (WAL), next to a running receiver, whose workers do the work.' +
        '\nCtrl-C or SIGTERM stops it after the batch in flight: a line on stderr says what was queued and where it stopped, with the --after that continues from there (with --json, also the counts so far with "interrupted": true), exit 130 or 143; during --wait, it ends the wait at once, saying what had finished (the work stays queued). A second one (not the same one within half a second, as timeout repeats it) ends it at once. A --dry-run ends at once.' +
        '\nOn a terminal a run shows a bar on stderr (with --json, a line rewritten in place: replay: 12,000 events selected so far; replay --wait: 40 of 300 finished (13%)); elsewhere stdout lists the events and stderr shows nothing, unless --progress. Stdout and the exit code are the same either way.',
    )
    .action((o, cmd: Command) => {
      // --timeout bounds --wait and nothing else: given alone, a script took it for a bound of the replay.
      if (cmd.getOptionValueSource('timeout') === 'cli' && !o.wait) throw new UsageError('--timeout bounds --wait only: give --wait too, or leave --timeout out');
      return done(import('../commands/replay.js').then((m) => m.runReplay(io, o)));
    });
}

/** status: what the database holds, at a glance. */
function addStatusCommand(program: Command, { io, done }: CommandContext): void {
  program
    .command('status')
    .description('health at a glance: events by type, jobs by state, results by state, dead letters, quarantine, sinks, paused sources, oldest pending job')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .addHelpText('after', examples(['DATABASE_PATH=./data/receiver.db hiring-receiver status', 'hiring-receiver status --json | jq .dead_letters']) + '\nNeeds only DATABASE_PATH (sinks are read from CONFIG_FILE when set).')
    .action((o) => done(import('../commands/status.js').then((m) => m.runStatus(io, o))));
}
