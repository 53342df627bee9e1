"""The published fio/vdbench test matrices as presets, each table with its seed's load.

==============  ==========================================================================
preset          points (read % 100/75/50/25/0 unless stated) and the seed's load per table
==============  ==========================================================================
random-4k       4 KiB random — seed 000, GCNV Extreme over NFSv3: 8 fio jobs per VM on six
                n2-standard-32, 1 TiB per VM, nconnect=16, iodepth not stated (searched)
random-8k       8 KiB random — as above
seq-64k         64 KiB sequential — as above
seq-256k        256 KiB sequential — as above
seed-000        the four above (20 points)
flex-custom     64 KiB sequential, 8 KiB random — seed 000, Flex File custom performance:
                as above with 96 GiB per VM and rsize=wsize=65536
iscsi           4/8 KiB random (24 jobs × iodepth 4 per VM), 64/256 KiB sequential (24 jobs ×
                iodepth 1) — seed 000's iSCSI tables, 720 GiB per VM (20 points)
nconnect        8 KiB, 100 % read — seed 002's nconnect test: one n2-standard-32, 6 TiB
four-corners    4 KiB random read/write, 64 KiB sequential read/write — seed 003 (AFF A800,
                vdbench: 128 / 64 / 16 / 8 threads, 0-120 % iorate curve per corner)
block-sweep     4 KiB … 1 MiB random at every mix (45 points) — seed 004 (OCI Block Volume:
                direct I/O, 10 GB working set)
anf-mix         64 KiB sequential and 4 KiB random at 100, 90 … 0 % read (22 points) — seed
                001 (Azure NetApp Files, 1 TiB working set)
==============  ==========================================================================

Each table's jobs, queue depth, clients, working set and mount options are cited to the
seed sentence that states them (:class:`~sim.baseline.points.Cite`); what a seed leaves out
is said in the table's ``notes``.
"""

from __future__ import annotations

from sim.baseline.points import GIB, TIB, Access, Cite, MountOption, Point, Preset, SeedLoad

MIXES = (100, 75, 50, 25, 0)
MIXES_10 = tuple(range(100, -1, -10))  # seed 001: "decréscimos de 10% de cada vez"
SWEEP_SIZES_KIB = (4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: The iorate curve: vdbench's curve runs fractions of an uncapped run; seed 003 says
#: "0-120 %". Every 10 % from 10 to 100 draws the curve evenly, 110 and 120 % ask for more
#: than the maximum and show where latency goes when the storage is asked past it.
CURVE_PCTS = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120)

S000 = "000_86fde6e6690b0d9c.txt"
S001 = "001_ec11900240184765.txt"
S002 = "002_26a53d12d47323af.txt"
S003 = "003_feeaf53e70529773.txt"
S004 = "004_2edda23bd904e66d.txt"
#: Compute Engine's machine-type table (not the seeds): n2-standard-32 has 32 vCPUs and
#: 128 GB of memory, GB there meaning 2^30 bytes.
N2_STANDARD_32_RAM = 128 * GIB

_NFS = "Limites de capacidade de processamento de volume para acesso NFSv3"
_EXTREME = "Nível de serviço extremo"
_FLEX = "Nível de serviço Flex File com desempenho personalizado"
_ISCSI = "Limites de taxa de transferência de volume para acesso iSCSI"
_HEADING = {
    ("random", 4): "Tamanho do bloco de 4 KiB (E/S aleatória)",
    ("random", 8): "Tamanho do bloco de 8 KiB (E/S aleatória)",
    ("sequential", 64): "Tamanho do bloco de 64 KiB (E/S sequencial)",
    ("sequential", 256): "Tamanho do bloco de 256 KiB (E/S sequencial)",
}
MAXIMUM = Cite(
    S000,
    "Teste de desempenho",
    "Os números usados para produzir os resultados a seguir foram configurados para mostrar o "
    "máximo de resultados.",
)
_NCONNECT_16 = "Opção de montagem nconnect configurada em cada host com um valor de 16"


def _row(access: Access, block_kib: int, mixes: tuple[int, ...] = MIXES) -> tuple[Point, ...]:
    return tuple(Point(access, block_kib, pct) for pct in mixes)


def _gcnv_nfs(access: Access, kib: int, level: str) -> SeedLoad:
    """A seed-000 NFSv3 table: Extreme (1 TiB per VM) or Flex custom (96 GiB, rsize/wsize)."""
    within = (_NFS, _EXTREME if level == "Extreme" else _FLEX)

    def cite(quote: str) -> Cite:
        return Cite(S000, _HEADING[(access, kib)], quote, within)

    mount: tuple[MountOption, ...]
    if level == "Extreme":
        working_set = TIB
        sizes = "1 TiB de conjunto de trabalho para cada máquina virtual, com um total combinado de 6 TiB"
        mount = (MountOption("nconnect", 16, cite(_NCONNECT_16)),)
    else:
        working_set = 96 * GIB
        sizes = "Conjunto de trabalho de 96 GiB para cada máquina virtual, com um total combinado de 576 GiB."
        where = "estão" if kib == 64 else "em cada host estão"
        rsize = cite(f"As opções de montagem rsize e wsize {where} configuradas em 65536.")
        mount = (
            MountOption("nconnect", 16, cite(_NCONNECT_16)),
            MountOption("rsize", 65536, rsize),
            MountOption("wsize", 65536, rsize),
        )
    return SeedLoad(
        jobs=8,
        iodepth=None,
        clients=6,
        cites=(
            cite(f"Tamanho de bloco de {kib} KiB em um único volume com seis máquinas virtuais n2-standard-32"),
            cite("O Fio foi executado com oito jobs em cada máquina virtual, totalizando 48 jobs."),
            cite(sizes),
            MAXIMUM,
        ),
        table=f"NFSv3 {kib} KiB {access}, {level}",
        working_set=working_set,
        client="n2-standard-32",
        client_ram=N2_STANDARD_32_RAM,
        search=True,
        mount=mount,
    )  # fmt: skip


def _iscsi(access: Access, kib: int) -> SeedLoad:
    depth = 4 if access == "random" else 1
    jobs = "jobs" if kib == 4 else "tarefas"  # the page's own words differ per table

    def cite(quote: str) -> Cite:
        return Cite(S000, _HEADING[(access, kib)], quote, (_ISCSI,))

    return SeedLoad(
        jobs=24,
        iodepth=depth,
        clients=6,
        cites=(
            cite(f"Tamanho de bloco de {kib} KiB para 6 volumes com 6 máquinas virtuais n2-standard-32"),
            cite(f"O Fio foi executado com 24 {jobs} em cada máquina virtual com iodepth definido como {depth}."),
            cite("Conjunto de trabalho de 720 GiB para cada máquina virtual, com um total combinado de 4.320 GiB."),
            cite("iSCSI com o parâmetro nr_sessions definido como 16 em cada host."),
        ),
        table=f"iSCSI {kib} KiB {access}, Flex Unified",
        working_set=720 * GIB,
        client="n2-standard-32",
        client_ram=N2_STANDARD_32_RAM,
        notes=("16 iSCSI sessions per host (nr_sessions): dbsim does not read a LUN's session "
               "count; `iscsiadm -m session` lists this host's",),
    )  # fmt: skip


def _nconnect() -> SeedLoad:
    def cite(quote: str) -> Cite:
        return Cite(S002, "Ajustar o cliente", quote)

    return SeedLoad(
        jobs=8,
        iodepth=None,
        clients=1,
        cites=(
            cite("Carga de trabalho de leitura de 100%"),
            cite("Tamanho do bloco de 8 KiB em um único volume"),
            cite("Máquina virtual n2-standard-32 usando o sistema operacional Red Hat 9"),
            cite("Conjunto de trabalho de 6 TiB"),
            cite("Oito jobs foram executados com apenas a opção RSS do cliente SMB mudando entre as execuções de teste."),
            cite("O parâmetro iodepth foi aumentado em cinco cada execução até que a capacidade de processamento máxima fosse atingida."),
        ),
        table="NFS nconnect comparison, 8 KiB read, one VM",
        working_set=6 * TIB,
        client="n2-standard-32",
        client_ram=N2_STANDARD_32_RAM,
        search=True,
        mount=(MountOption("nconnect", 16, cite("O uso de um valor nconnect de 16 resultou em cinco vezes mais performance do que quando não estava ativado.")),),
        notes=(
            "the NFS test states no jobs: the eight of the SMB test beside it are used",
            "random or sequential is not stated: random, as seed 000's 8 KiB tables",
        ),
    )  # fmt: skip


_CORNERS = (
    (Point("random", 4, 100), 128, "Lecture aléatoire 4K : 100 % de lecture, 128 threads, 0-120 % d'iorate"),
    (Point("random", 4, 0), 64, "Écriture aléatoire 4K : 100 % d'écriture, 64 threads, 0-120 % de vitesse"),
    (Point("sequential", 64, 100), 16, "Lecture séquentielle 64K : 100 % de lecture, 16 threads, 0-120 % d'iorate"),
    (Point("sequential", 64, 0), 8, "Écriture séquentielle 64K : 100 % d'écriture, 8 threads, 0-120 % d'iorate"),
)  # fmt: skip
_A800_CLIENTS = Cite(
    S003,
    "Configuration des performances",
    "16 liaisons de 32 Go vers 12 serveurs Dell PowerEdge R740xd exécutant SLES 12 SP4",
)
_A800_LUNS = Cite(
    S003,
    "Configuration des performances",
    "Chaque serveur a été provisionné avec 2 LUN de 350 Go, ce qui représente une empreinte de "
    "stockage totale de 8.4 To.",
)


def _corner(threads: int, quote: str) -> SeedLoad:
    return SeedLoad(
        jobs=threads,
        iodepth=1,
        clients=12,
        cites=(Cite(S003, "Performance", quote), _A800_CLIENTS, _A800_LUNS),
        table=f"vdbench four corners, {threads} threads",
        working_set=2 * 350 * 10**9,
        client="Dell PowerEdge R740xd",
        notes=(
            "a vdbench thread is one I/O in flight: iodepth 1 per thread",
            "the page does not say whether the threads are per server or in total: taken per "
            "server",
            "the servers' memory is not stated: the working set is not scaled by it",
        ),
    )


def _oci() -> SeedLoad:
    methodology = "Testando a Metodologia e o Desempenho da Opção de Desempenho Elástico Balanceado"
    return SeedLoad(
        jobs=1,
        iodepth=None,
        clients=1,
        cites=(
            Cite(S004, "Volume em Blocos de 1 TB", "Um volume de 1 TB foi montado para uma instância bare metal em execução na região Phoenix."),
            Cite(S004, "Volume em Blocos de 1 TB", "A forma da instância foi densa, a carga de trabalho foi E/S direta com um conjunto de trabalho de 10 GB."),
            Cite(S004, methodology, "O eixo Z representa a combinação de leitura/gravação testada, variando de 100% de leitura a 100% de gravação."),
        ),
        table="OCI Block Volume, Balanced, block size × mix",
        working_set=10 * 10**9,
        client="bare metal, dense shape",
        notes=(
            "jobs and iodepth are not stated: one fio job at fio's default depth, 1 "
            "(--iodepth search looks for the maximum)",
            "the mix axis is in images: dbsim steps it 100/75/50/25/0 % read",
            "the instance's memory is not stated: the 10 GB are not scaled by it",
        ),
    )  # fmt: skip


def _anf(access: Access) -> SeedLoad:
    if access == "sequential":
        section = "Taxa de transferência da carga de trabalho do Linux"
        said = "O gráfico abaixo representa uma carga de trabalho sequencial de 64 kibibytes (KiB) e um conjunto de trabalho de 1 TiB."
        steps = (
            "O gráfico ilustra decréscimos de 10% de cada vez, de leitura pura para escrita pura."
        )
    else:
        section = "IOPS de carga de trabalho do Linux"
        said = "O gráfico a seguir representa uma carga de trabalho aleatória de 4 kibibytes (KiB) e um conjunto de trabalho de 1 TiB."
        steps = "Este gráfico ilustra decréscimos de 10% de cada vez, de leitura pura para escrita pura."
    within = ("Expansão do Linux",)
    return SeedLoad(
        jobs=1,
        iodepth=None,
        clients=1,
        cites=(Cite(S001, section, said, within), Cite(S001, section, steps, within)),
        table=f"Azure NetApp Files, {'64 KiB sequential' if access == 'sequential' else '4 KiB random'}, 10 % steps",
        working_set=TIB,
        notes=(
            "clients, jobs and iodepth are not stated: one fio job at fio's default depth, 1 "
            "(--iodepth search looks for the maximum)",
            "the client is not stated: the working set is not scaled by its memory",
        ),
    )  # fmt: skip


def _gcnv_preset(name: str, title: str, *tables: tuple[Access, int]) -> Preset:
    return Preset(name, title, tuple((_gcnv_nfs(a, k, "Extreme"), _row(a, k)) for a, k in tables))


_SEED000_TABLES: tuple[tuple[Access, int], ...] = (
    ("random", 4),
    ("random", 8),
    ("sequential", 64),
    ("sequential", 256),
)

_FLEX_TABLES: tuple[tuple[Access, int], ...] = (("sequential", 64), ("random", 8))

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        _gcnv_preset("random-4k", "4 KiB random, 100→0 % read", ("random", 4)),
        _gcnv_preset("random-8k", "8 KiB random, 100→0 % read", ("random", 8)),
        _gcnv_preset("seq-64k", "64 KiB sequential, 100→0 % read", ("sequential", 64)),
        _gcnv_preset("seq-256k", "256 KiB sequential, 100→0 % read", ("sequential", 256)),
        _gcnv_preset(
            "seed-000",
            "seed 000's NFSv3 Extreme matrix: 4/8 KiB random and 64/256 KiB sequential",
            *_SEED000_TABLES,
        ),
        Preset(
            "flex-custom",
            "seed 000's NFSv3 Flex custom-performance tables: 64 KiB sequential, 8 KiB random",
            tuple((_gcnv_nfs(a, k, "Flex"), _row(a, k)) for a, k in _FLEX_TABLES),
        ),
        Preset(
            "iscsi",
            "seed 000's iSCSI matrix: 4/8 KiB random, 64/256 KiB sequential",
            tuple((_iscsi(a, k), _row(a, k)) for a, k in _SEED000_TABLES),
        ),
        Preset(
            "nconnect",
            "seed 002's nconnect test: 8 KiB, 100 % read, one client",
            ((_nconnect(), (Point("random", 8, 100),)),),
            advice=(
                "seed 002: nconnect=16 gave five times the performance of no nconnect. To "
                "compare on this client, mount the same export twice (-o nconnect=16, and "
                "without nconnect), run this preset on each mount and divide the two IOPS",
            ),
        ),
        Preset(
            "four-corners",
            "four corners: 4 KiB random read/write, 64 KiB sequential read/write, iorate curve",
            tuple((_corner(threads, quote), (point,)) for point, threads, quote in _CORNERS),
            curve=CURVE_PCTS,
            curve_cite=Cite(S003, "Performance", _CORNERS[0][2]),
        ),
        Preset(
            "block-sweep",
            "4 KiB … 1 MiB random at 100→0 % read (seed 004's axes)",
            ((_oci(), tuple(p for size in SWEEP_SIZES_KIB for p in _row("random", size))),),
        ),
        Preset(
            "anf-mix",
            "seed 001's 10 % steps: 64 KiB sequential and 4 KiB random, 100→0 % read",
            (
                (_anf("sequential"), _row("sequential", 64, MIXES_10)),
                (_anf("random"), _row("random", 4, MIXES_10)),
            ),
        ),
    )
}
