package streamchaos;

import org.apache.spark.TaskContext;
import org.apache.spark.api.plugin.DriverPlugin;
import org.apache.spark.api.plugin.ExecutorPlugin;
import org.apache.spark.api.plugin.SparkPlugin;

/**
 * The "reading" phase for sources of Spark's own (its Kafka source), where no Python runs (spark.plugins).
 *
 * Spark calls an executor plugin's onTaskStart in the task's own thread, its TaskContext set, before the task
 * reads anything. A task of a trial's query carries the driver's local properties: the harness sets
 * streamchaos.reading.controller (and .incarnation) on the thread that starts the query, Spark adds
 * streaming.sql.batchId for each micro-batch. Such a task reports "reading" of its batch and waits for the
 * harness, like the event-log source's reader does; every other task passes untouched.
 */
public class ReadingBarrier implements SparkPlugin {
    @Override
    public DriverPlugin driverPlugin() {
        return null;
    }

    @Override
    public ExecutorPlugin executorPlugin() {
        return new ExecutorPlugin() {
            @Override
            public void onTaskStart() {
                TaskContext task = TaskContext.get();
                if (task == null) {
                    return;
                }
                String controller = task.getLocalProperty("streamchaos.reading.controller");
                String batch = task.getLocalProperty("streaming.sql.batchId");
                if (controller == null || controller.isEmpty() || batch == null) {
                    return;
                }
                String incarnation = task.getLocalProperty("streamchaos.reading.incarnation");
                Barrier.report(controller, incarnation == null ? "0" : incarnation, Long.parseLong(batch), "reading",
                        "\"partition\": " + task.partitionId() + ", \"stage\": " + task.stageId(), "task");
            }
        };
    }
}
