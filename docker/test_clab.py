#!/usr/bin/env python3
"""Self-test of docker/clab.py's clean-up, in a few seconds, without docker: a stand-in
`docker` runs each "container" as a process in a network namespace of its own (unshare -n),
and the real `ip` makes the namespace names and veths. Needs root, iproute2 and unshare.
   python3 docker/test_clab.py

- A deploy that fails part way (its second link names an interface too long for Linux) must
  leave nothing: no container, no namespace name, no veth on the host (it left all three, and
  a host veth named after its process id that nothing could find again).
- `destroy` must remove a lab's veths that a deploy killed mid-way left on the host (it never
  looked for them), with its containers and namespace names.
- A lab already running is not removed by a second deploy that fails on it."""
import json
import os
import subprocess
import sys
import tempfile

DOCKER = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, DOCKER)
import clab  # noqa: E402

FAKE_DOCKER = r'''#!/usr/bin/env python3
import os, signal, subprocess, sys
state = os.environ["FAKE_DOCKER_DIR"]
a = sys.argv[1:]
def pidfile(name):
    return os.path.join(state, name)
if a[0] == "run":
    name = a[a.index("--name") + 1]
    if os.path.exists(pidfile(name)):
        sys.exit(f"docker: Conflict. The container name {name} is already in use")
    p = subprocess.Popen(["unshare", "-n", "sleep", "300"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    open(pidfile(name), "w").write(str(p.pid))
    print(name)
elif a[0] == "inspect":
    name = a[-1]
    if not os.path.exists(pidfile(name)):
        sys.exit(f"Error: No such object: {name}")
    print(open(pidfile(name)).read())
elif a[0] == "rm":
    name = a[-1]
    if os.path.exists(pidfile(name)):
        try:
            os.kill(int(open(pidfile(name)).read()), signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.remove(pidfile(name))
elif a[0] == "exec":
    sys.exit(0)
else:
    sys.exit(f"fake docker: {a[0]} not implemented")
'''

failures = []


def check(ok, what):
    print(f"test_clab: {'ok' if ok else 'FAIL'}: {what}")
    if not ok:
        failures.append(what)


def host_links():
    return {l["ifname"] for l in json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                                          text=True, check=True).stdout)}


def netns_names():
    return set(os.listdir("/var/run/netns")) if os.path.isdir("/var/run/netns") else set()


def topology(d, lab, second_if):
    path = os.path.join(d, f"{lab}.clab.yml")
    with open(path, "w") as f:
        f.write(f"""name: {lab}
topology:
  nodes:
    a: {{kind: linux, image: x}}
    b: {{kind: linux, image: x}}
  links:
    - endpoints: ["a:eth1", "b:eth1"]
    - endpoints: ["a:eth2", "b:{second_if}"]
""")
    return path


def clab_py(env, *args):
    p = subprocess.run([sys.executable, os.path.join(DOCKER, "clab.py"), *args], env=env,
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def main():
    if os.geteuid() != 0:
        print("test_clab: skipped: needs root (ip netns, veths)")
        return
    with tempfile.TemporaryDirectory() as t:
        bin_dir, state = os.path.join(t, "bin"), os.path.join(t, "containers")
        os.mkdir(bin_dir)
        os.mkdir(state)
        with open(os.path.join(bin_dir, "docker"), "w") as f:
            f.write(FAKE_DOCKER.replace("#!/usr/bin/env python3", f"#!{sys.executable}", 1))
        os.chmod(os.path.join(bin_dir, "docker"), 0o755)
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_DOCKER_DIR": state}
        lab = f"t{os.getpid()}"
        links0, ns0 = host_links(), netns_names()
        bad = topology(t, lab, "averyveryverylongname")
        good = topology(t, lab + "g", "eth2")
        try:
            rc, out = clab_py(env, "deploy", "-t", bad)
            check(rc != 0 and "removed what this deploy had made" in out,
                  f"a deploy failing on its second link fails and says what it removed ({out.strip()[-200:]})")
            check(host_links() == links0, f"no veth left on the host: {sorted(host_links() - links0)}")
            check(netns_names() == ns0, f"no namespace name left: {sorted(netns_names() - ns0)}")
            check(os.listdir(state) == [], f"no container left: {os.listdir(state)}")

            # What a deploy killed mid-way leaves: a container, its namespace name, a veth on
            # the host under the lab's names.
            rc, out = clab_py(env, "deploy", "-t", good)
            check(rc == 0, f"the good topology deploys ({out.strip()[-200:]})")
            pre = clab.veth_prefix(lab + "g")
            subprocess.run(["ip", "link", "add", f"{pre}a7", "type", "veth", "peer", "name", f"{pre}b7"], check=True)
            # A second deploy of a lab that runs fails on its names, and leaves the lab as it was.
            rc, out = clab_py(env, "deploy", "-t", good)
            check(rc != 0 and len(os.listdir(state)) == 2 and f"clab-{lab}g-a" in netns_names(),
                  f"a second deploy fails and leaves the running lab alone ({out.strip()[-200:]})")
            rc, out = clab_py(env, "destroy", "-t", good)
            check(rc == 0, f"destroy ({out.strip()})")
            check(host_links() == links0, f"destroy removes the lab's veths left on the host: {sorted(host_links() - links0)}")
            check(netns_names() == ns0, f"and its namespace names: {sorted(netns_names() - ns0)}")
            check(os.listdir(state) == [], f"and its containers: {os.listdir(state)}")
        finally:
            # Whatever the script did, nothing of the test stays.
            for name in os.listdir(state):
                subprocess.run([os.path.join(bin_dir, "docker"), "rm", "-f", name], env=env)
            for ns in netns_names() - ns0:
                subprocess.run(["ip", "netns", "delete", ns])
            for link in host_links() - links0:
                subprocess.run(["ip", "link", "delete", link], stderr=subprocess.DEVNULL)
    if failures:
        sys.exit(f"test_clab: {len(failures)} failed")
    print("test_clab: all passed")


main()
