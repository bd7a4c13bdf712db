"""Users' own training scripts, as the tests run them through `clustertune launch`: plain
PyTorch DDP with its own checkpointing, and an Accelerate loop. They import torch (and
accelerate) only, plus clustertune's stdlib helper."""

DDP_SCRIPT = r'''
import json, os, sys, time
import torch
import torch.distributed as dist
from clustertune import script

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
pause = float(os.environ.get("STEP_PAUSE", "0"))
hold = int(os.environ.get("HOLD_AT", "0"))  # wait at this step for a stop request
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
ckpt = script.checkpoint_dir() / "state.pt"
start = 0
if ckpt.is_file():
    state = torch.load(ckpt, weights_only=True)
    model.module.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); start = state["step"]
print(f"rank {rank}/{world} attempt {script.attempt()} starts at step {start}", flush=True)

def save(step):
    if rank == 0:
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
        os.replace(tmp, ckpt)
    dist.barrier()

loss = None
for step in range(start, steps):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=g)
    y = x.sum(dim=1, keepdim=True).sin()
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    if rank == 0:
        (script.run_dir() / "progress").write_text(str(step + 1))
    time.sleep(pause)
    if step + 1 == hold:  # a test's cancel arrives here, however slow the machine
        while not script.should_stop():
            time.sleep(0.05)
    # every rank must agree to stop on the same step
    flag = torch.tensor([1.0 if script.should_stop() else 0.0])
    dist.all_reduce(flag)
    if flag.item() > 0:
        save(step + 1)
        print(f"rank {rank} saved at step {step + 1} and stops", flush=True)
        dist.destroy_process_group()
        sys.exit(0)
save(steps)
if rank == 0:
    (script.run_dir() / "final.json").write_text(json.dumps({"loss": loss.item() if loss is not None else None, "attempt": script.attempt()}))
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
'''

# The shape of an Accelerate loop converted from a plain PyTorch one: a small CNN on synthetic
# images (no downloads), the Accelerator placing model, optimizer and data on each rank.
ACCELERATE_SCRIPT = r'''
import json
import torch
from accelerate import Accelerator
from clustertune import script

accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
images = torch.randn(256, 1, 8, 8)
labels = (images.mean(dim=(1, 2, 3)) > 0).long()
loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(images, labels), batch_size=16, shuffle=True)
model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(256, 2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
model, opt, loader = accelerator.prepare(model, opt, loader)
first = last = None
for epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        accelerator.backward(loss)
        opt.step(); opt.zero_grad()
        value = accelerator.reduce(loss.detach(), reduction="mean").item()
        first = value if first is None else first
        last = value
    if script.should_stop():
        break
accelerator.save_state(str(script.checkpoint_dir() / "accelerate"))
if accelerator.is_main_process:
    (script.run_dir() / "final.json").write_text(json.dumps(
        {"first": first, "last": last, "processes": accelerator.num_processes, "type": str(accelerator.distributed_type)}))
accelerator.print(f"done on {accelerator.num_processes} processes")
'''
