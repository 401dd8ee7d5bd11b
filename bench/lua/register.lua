-- wrk script: distinct registrations. Every request registers an instance that no
-- earlier request named: thread t (1-based) registers 127.<t>.<hi>.<lo>:<port>,
-- counting up, spread round-robin over <services> services named <prefix>-<i>. The
-- addresses are loopback ones: persistent instances are probed by TCP, and the bench
-- sends nothing beyond this machine.
--
-- Arguments (after wrk's `--`): prefix services ephemeral
--   wrk -t2 -c50 -d10s -s register.lua http://127.0.0.1:8848 -- reg 1000 true

local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local prefix, services, ephemeral
local n = 0

function init(args)
  prefix = args[1] or "reg"
  services = tonumber(args[2] or "1000")
  ephemeral = args[3] or "true"
end

function request()
  local ip = string.format("127.%d.%d.%d", tid, math.floor(n / 256) % 256, n % 256)
  local port = 10000 + math.floor(n / 65536)
  local path = string.format(
    "/nacos/v1/ns/instance?serviceName=%s-%d&ip=%s&port=%d&ephemeral=%s",
    prefix, n % services, ip, port, ephemeral)
  n = n + 1
  return wrk.format("POST", path, nil, "")
end
