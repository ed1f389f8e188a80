// Stands in for HIRING_API_URL during the benchmark: answers every scoring GET
// at once with a small completed result, so the worker never waits on it.
import { createServer } from 'node:http';

let served = 0;
const server = createServer((req, res) => {
  served++;
  if (req.url === '/__count') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify({ served }));
  }
  const id = decodeURIComponent((req.url ?? '').split('/')[4] ?? 'unknown');
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ application_id: id, status: 'completed', overall_score: 81, summary: 'bench' }));
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
