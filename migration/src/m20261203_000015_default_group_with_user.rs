//! Why: every user has one default feed group, which used to be created on
//! first use — by whichever request came first, reads included (`groups`
//! inserted it). Reads must never write, so the group is now created with
//! the user, in the same statement, whatever path creates the user (the
//! GraphQL `createUser`, `trellis user add`, the first admin, later single
//! sign-on): an `AFTER INSERT` trigger on `users`. Existing users without
//! one get it now. The name is `feeds::service::DEFAULT_GROUP_NAME`.

use sea_orm_migration::{prelude::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

const BACKFILL: &str = "INSERT INTO feed_groups (user_id, name, is_default, created_at, updated_at) \
     SELECT id, 'Default', TRUE, created_at, created_at FROM users \
     WHERE NOT EXISTS (SELECT 1 FROM feed_groups g WHERE g.user_id = users.id AND g.is_default)";

const SQLITE_TRIGGER: &str = "CREATE TRIGGER users_default_feed_group AFTER INSERT ON users \
     BEGIN \
       INSERT INTO feed_groups (user_id, name, is_default, created_at, updated_at) \
       VALUES (NEW.id, 'Default', TRUE, NEW.created_at, NEW.created_at); \
     END";

const POSTGRES_FUNCTION: &str = "CREATE FUNCTION users_default_feed_group() RETURNS trigger \
     LANGUAGE plpgsql AS $$ BEGIN \
       INSERT INTO feed_groups (user_id, name, is_default, created_at, updated_at) \
       VALUES (NEW.id, 'Default', TRUE, NEW.created_at, NEW.created_at); \
       RETURN NEW; \
     END $$";

const POSTGRES_TRIGGER: &str = "CREATE TRIGGER users_default_feed_group AFTER INSERT ON users \
     FOR EACH ROW EXECUTE FUNCTION users_default_feed_group()";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(BACKFILL).await?;
        match manager.get_database_backend() {
            DatabaseBackend::Postgres => {
                db.execute_unprepared(POSTGRES_FUNCTION).await?;
                db.execute_unprepared(POSTGRES_TRIGGER).await?;
            }
            _ => {
                db.execute_unprepared(SQLITE_TRIGGER).await?;
            }
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DatabaseBackend::Postgres => {
                db.execute_unprepared("DROP TRIGGER IF EXISTS users_default_feed_group ON users")
                    .await?;
                db.execute_unprepared("DROP FUNCTION IF EXISTS users_default_feed_group()")
                    .await?;
            }
            _ => {
                db.execute_unprepared("DROP TRIGGER IF EXISTS users_default_feed_group")
                    .await?;
            }
        }
        Ok(())
    }
}
