"""Data-parallel launch and failure paths that need no GPU (docs/distributed.md).

On a machine without a usable GPU every rank fails to start its CUDA backend, which exercises the
`--gpus N` launcher: the parent names the failing rank, stops the others and passes the rank's
exit code on. Training on 2 GPUs is tested by tests/gpu/dp_equivalence.sh (label gpu).
Run: HGPC_BUILD=build /usr/bin/python3 -m unittest tests/integration/test_distributed.py
"""
import os
import subprocess
import unittest

from common import HGPC, HgpcTestCase, run


def gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout
        return sum(line.startswith("GPU") for line in out.splitlines())
    except OSError:
        return 0


def rendezvous_dirs():
    return {d for d in os.listdir("/tmp") if d.startswith("hgpc-rendezvous-")}


class DistributedTest(HgpcTestCase):
    def test_plan_for_one_gpu_refuses_several(self):
        exe = self.compile(args=["--batch", "8"])
        code, _, err = run([exe, "--data", "synthetic:64", "--steps", "1", "--gpus", "2"])
        self.assertEqual(code, 2, err)
        self.assertIn("compile it with hgpc compile --ranks 2", err)
        self.assertRegex(err, r"rank [01] of 2 failed \(exit code 2 \(usage error\)\); stopping")

    @unittest.skipIf(gpus() >= 1, "this machine has a GPU; the no-GPU path is not reachable")
    def test_rank_failure_is_named_and_its_exit_code_passed_on(self):
        exe = self.compile(args=["--batch", "8", "--ranks", "2"])
        before = rendezvous_dirs()
        code, _, err = run([exe, "--data", "synthetic:64", "--steps", "1", "--gpus", "2"], timeout=60)
        self.assertEqual(code, 6, err)
        self.assertRegex(err, r"error: rank [01]: device error: ")
        self.assertRegex(err, r"rank [01] of 2 failed \(exit code 6 \(device error\)\); stopping the other ranks")
        self.assertEqual(rendezvous_dirs() - before, set(), "the launcher leaves its directory behind")

    def test_cpu_backend_is_one_rank(self):
        exe = self.compile(args=["--batch", "8", "--ranks", "2"])
        code, _, err = run([exe, "--data", "synthetic:64", "--steps", "1", "--gpus", "2",
                            "--device", "cpu"], timeout=60)
        self.assertEqual(code, 2, err)
        self.assertIn("--device cpu is one rank", err)

    def test_two_rank_plan_trains_on_one_process(self):
        """Without a launcher the all-reduce is the identity: the plan trains on the CPU."""
        exe = self.compile(args=["--batch", "8", "--ranks", "2"])
        code, _, err = run([exe, "--data", "synthetic:64", "--steps", "2", "--device", "cpu",
                            "--progress", "none"], timeout=120)
        self.assertEqual(code, 0, err)

    def test_mpi_launch_needs_mpi_or_a_rendezvous_and_no_gpus_flag(self):
        """Under mpirun without --rendezvous the NCCL id goes over MPI; without an MPI library
        that is a usage error saying what to do. (The real MPI broadcast: CTest mpi_bootstrap.)"""
        exe = self.compile(args=["--batch", "8", "--ranks", "2"])
        env = dict(os.environ, OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2",
                   OMPI_COMM_WORLD_LOCAL_RANK="1", HGPC_MPI_LIBRARY="/nonexistent/libmpi.so.40")
        code, _, err = run([exe, "--data", "synthetic:64", "--steps", "1"], env=env, timeout=60)
        self.assertEqual(code, 2, err)
        self.assertIn("error: rank 1: usage error: ", err)
        self.assertIn("pass --rendezvous DIR", err)
        self.assertIn("install the MPI that mpirun belongs to", err)
        code, _, err = run([exe, "--data", "synthetic:64", "--steps", "1", "--gpus", "2"], env=env,
                           timeout=60)
        self.assertEqual(code, 2, err)
        self.assertIn("under mpirun, start one process per GPU", err)

    def test_hgpc_rejects_bad_rank_flags(self):
        for flags, want in ((["--ranks", "0"], "--ranks"), (["--ranks", "2", "--bucket-mb", "0"], "--bucket-mb"),
                            (["--sync-bn"], "--sync-bn needs --ranks 2")):
            code, _, err = run([HGPC, "compile", self.compile_model(), "-o", self.path("x"), "--batch", "8", *flags])
            self.assertEqual(code, 2, err)
            self.assertIn(want, err)

    def compile_model(self):
        from common import LENET
        return LENET


if __name__ == "__main__":
    unittest.main()
