// What a process inside sees of its sandbox, with nothing that differs between two sandboxes
// started the same way (ids, times): processes, files where a user leaves them, the id map's
// shape, files owned by ids outside it, mounts, environment, limits.
export const PROBE = [
  // no pipe: a pipeline's second command may not have become itself yet when ps looks
  'echo "ps:"; ps -e -o comm=',
  'echo "files:"; ls -A /tmp /workspace /root /dev/shm /var/tmp 2>&1',
  'echo "ids:"; awk \'{print $1, $3}\' /proc/self/uid_map /proc/self/gid_map',
  'echo "unmapped owners:"; find / -xdev \\( -nouser -o -nogroup \\) 2>/dev/null | head -5',
  'echo "mounts:"; sed -E "s/^([^ ]+ ){4}([^ ]+) .* - ([^ ]+) .*/\\2 \\3/" /proc/self/mountinfo',
  'echo "env:"; env | grep -v "^PWD=" | sort',
  'echo "limits:"; cat /proc/self/limits',
  'echo "host:"; hostname',
  // the policy every process inherits from the init: a pooled init confines itself at hand-over
  'echo "policy:"; grep -E "^(Cap|NoNewPrivs|Seccomp)" /proc/self/status',
  // the network namespace a pooled init makes at hand-over: interfaces, and the listeners
  'echo "net:"; awk \'NR > 2 {print $1, ($2 > 0)}\' /proc/net/dev; awk \'$4 == "0A" {print $2}\' /proc/net/tcp | sort',
].join('; ');
