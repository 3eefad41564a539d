# runner in a container: the `runner` command as the entry point, run as an unprivileged
# user, its state on a volume. Build from the repository root:
#
#     docker build -t payrunner .                          # PostgreSQL's driver included
#     docker build --build-arg EXTRAS=sandbox,postgresql -t payrunner:try .   # the examples too
#
# The job files are yours: mount them (a ConfigMap, a volume) or build FROM this image with
# `COPY jobs/ /work/jobs/`. docs/containers.md has a Kubernetes CronJob.

FROM python:3.11-slim AS wheel
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps -w /dist .

FROM python:3.11-slim
ARG EXTRAS=postgresql
COPY --from=wheel /dist/ /tmp/dist/
RUN set -e; wheel="$(ls /tmp/dist/payrunner-*.whl)"; \
    pip install --no-cache-dir "${wheel}[${EXTRAS}]"; rm -rf /tmp/dist; \
    useradd --system --uid 10001 --home-dir /work --create-home runner; \
    install -d -o runner -g runner -m 0700 /var/lib/runner
USER runner
WORKDIR /work
# The state (and the summaries in reports/) on a volume that outlives the container.
ENV RUNNER_STATE_DIR=/var/lib/runner \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/runner"]
# Exec form: runner is PID 1 and gets SIGTERM itself (calls in flight finish, exit 143).
ENTRYPOINT ["runner"]
CMD ["--help"]
