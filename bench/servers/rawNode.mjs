// The load generator's own ceiling: a raw node:http server that reads the body
// and answers 204. If the generator reaches more here than against bare Hono,
// it is not what limits the bare Hono figure.
import { createServer } from 'node:http';

const server = createServer((req, res) => {
  if (req.method === 'POST') {
    req.on('data', () => {});
    req.on('end', () => {
      res.writeHead(204);
      res.end();
    });
    return;
  }
  res.writeHead(200);
  res.end('ok');
});
server.keepAliveTimeout = 65_000;
server.listen(Number(process.env.PORT), '127.0.0.1', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
